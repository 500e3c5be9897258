"""The engine as a choice of the nested leave-one-out (harness.calibration.engine_choice): the pair whose inner
held-out error is best is taken in each fold, from the other models only."""

from __future__ import annotations

import numpy as np

from harness.calibration.calibrate import AUTO_CANDIDATES
from harness.calibration.choice import error_stats, nested_leave_one_out
from harness.calibration.engine_choice import nested_engine_choice, select_pair, split_pair
from harness.calibration.fits import Design

RNG = np.random.default_rng(7)
TRACKING = np.geomspace(2.0, 80.0, 14)
"""One engine's timings of 14 models, which a device's follow exactly (device = 3 x harness)."""
DEVICE = 3.0 * TRACKING
SCRAMBLED = TRACKING * RNG.lognormal(0.0, 0.35, TRACKING.size)
"""Another engine's timings of the same models: its per-model ratio to the device moves by ~35%."""


def test_the_engine_the_device_tracks_is_chosen_in_every_fold_where_the_other_misses() -> None:
    designs = {"other": Design(SCRAMBLED), "tracking": Design(TRACKING)}
    alone = nested_leave_one_out(designs["other"], DEVICE, AUTO_CANDIDATES)
    assert alone is not None and error_stats(DEVICE, alone.predicted)["within_10pct"] < 0.6
    chosen = nested_engine_choice(designs, DEVICE, AUTO_CANDIDATES)
    assert chosen is not None and {split_pair(pick)[0] for pick in chosen.picks} == {"tracking"}
    np.testing.assert_allclose(chosen.predicted, DEVICE, rtol=1e-9)
    assert select_pair(designs, DEVICE, AUTO_CANDIDATES) == ("tracking", "ols")  # exact: the simplest fit ties


def test_with_one_engine_it_is_the_nested_fit_choice_and_equal_engines_go_to_the_first() -> None:
    device = SCRAMBLED * RNG.lognormal(0.0, 0.05, SCRAMBLED.size) + 1.0
    fits_only = nested_leave_one_out(Design(SCRAMBLED), device, AUTO_CANDIDATES)
    one = nested_engine_choice({"only": Design(SCRAMBLED)}, device, AUTO_CANDIDATES)
    assert fits_only is not None and one is not None
    np.testing.assert_array_equal(one.predicted, fits_only.predicted)
    assert [split_pair(pick)[1] for pick in one.picks] == list(fits_only.picks)
    twins = nested_engine_choice({"first": Design(SCRAMBLED), "second": Design(SCRAMBLED)}, device, AUTO_CANDIDATES)
    assert twins is not None and {split_pair(pick)[0] for pick in twins.picks} == {"first"}
