"""Significance-aware ranks: real differences order models, indistinguishable ones share a rank."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from harness.cli import main
from harness.ranking import ALPHA, MIN_RELATIVE_GAP, compare, rank_samples, smallest_mannwhitney_p
from tests.analysis_fixtures import write_session


def by_model(entries):
    return {e.model: e for e in entries}


def test_separated_models_get_distinct_ranks_with_exact_p_values() -> None:
    samples = {"fast": [1.0, 1.1, 1.2, 1.05, 1.15], "mid": [2.0, 2.1, 2.2, 2.05, 2.15],
               "slow": [3.0, 3.2, 3.1, 3.3, 3.4]}
    entries = rank_samples(samples)
    assert [(e.model, e.rank) for e in entries] == [("fast", 1), ("mid", 2), ("slow", 3)]
    # Completely separated 5 vs 5: the exact two-sided p is 2 / C(10, 5).
    assert by_model(entries)["mid"].p_value == pytest.approx(2 / math.comb(10, 5))
    assert by_model(entries)["mid"].method == "mann-whitney" and by_model(entries)["mid"].compared_with == "fast"
    assert all(e.stability == 1.0 for e in entries)


def test_indistinguishable_models_share_a_rank_and_ranks_skip() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(10, 1, 8).tolist(), rng.normal(10, 1, 8).tolist()
    p = stats.mannwhitneyu(a, b, alternative="two-sided").pvalue
    assert p > ALPHA  # the premise: these two really are not distinguishable
    entries = by_model(rank_samples({"a": a, "b": b, "c": (np.array(a) + 20).tolist()}))
    assert entries["a"].rank == entries["b"].rank == 1
    assert entries["c"].rank == 3  # competition ranking: the shared first place takes places 1 and 2
    tied = [entries["a"], entries["b"]]
    assert [e.p_value for e in tied if e.p_value is not None] == [pytest.approx(p)]
    # Both stay within places 1..2 in every resample, since c is far away.
    assert all(e.stability == 1.0 and 1 <= e.position_low <= e.position_high <= 2 for e in tied)


def test_close_models_have_unstable_positions() -> None:
    rng = np.random.default_rng(11)
    samples = {"a": rng.normal(10.0, 1, 6).tolist(), "b": rng.normal(10.3, 1, 6).tolist()}
    entries = rank_samples(samples)
    assert entries[0].rank == entries[1].rank == 1
    assert (entries[0].position_low, entries[0].position_high) == (1, 2)


def test_too_few_repeats_for_mann_whitney_fall_back_to_bootstrap_intervals() -> None:
    assert smallest_mannwhitney_p(3, 3) == pytest.approx(0.1) and smallest_mannwhitney_p(4, 4) < ALPHA
    different, method, p = compare([1.0, 1.1, 1.2], [5.0, 5.1, 5.2])
    assert (different, method, p) == (True, "bootstrap-ci", None)
    different, method, _ = compare([1.0, 1.5, 2.0], [1.2, 1.7, 2.2])
    assert (different, method) == (False, "bootstrap-ci")


def test_a_single_repeat_supports_no_order() -> None:
    entries = rank_samples({"a": [1.0], "b": [2.0]})
    assert [e.rank for e in entries] == [1, 1]
    assert entries[1].method == "fewer than 2 repeats"


def test_rank_command_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    latencies = {"fast": [1.0, 1.1, 1.2, 1.05], "slow": [3.0, 3.2, 3.1, 3.3], "slow_too": [3.1, 3.0, 3.25, 3.2]}
    write_session(results, latencies, cpus=1.0)
    assert main(["rank", "--results-dir", str(results), "--json"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    ranks = {row["model"]: row["rank"] for row in result["ranking"]}
    assert ranks == {"fast": 1, "slow": 2, "slow_too": 2}
    medians = {row["model"]: row["median"] for row in result["ranking"]}
    assert medians == {m: pytest.approx(float(np.median(v))) for m, v in latencies.items()}
    assert main(["rank", "--results-dir", str(results), "--metric", "runtime_s"]) == 2
    assert "no ok run reported runtime_s" in capsys.readouterr().err


def test_a_significant_but_tiny_gap_ties() -> None:
    """Identical models measured apart by a consistent 1% (as an A/A run shows) must not be ranked apart."""
    a = [100.0, 100.1, 100.2, 100.3, 100.4, 100.5]
    b = [x * 1.01 + 0.5 for x in a]
    assert stats.mannwhitneyu(a, b, alternative="two-sided").pvalue < ALPHA  # the test alone would split them
    different, method, p = compare(a, b)
    assert (different, method) == (False, f"mann-whitney; medians within {MIN_RELATIVE_GAP:.0%}") and p < ALPHA
    assert [e.rank for e in rank_samples({"a": a, "b": b})] == [1, 1]
    c = [x * (1 + 2 * MIN_RELATIVE_GAP) for x in a]
    assert compare(a, c)[0] is True
