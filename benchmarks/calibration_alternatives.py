"""What else the calibration could do where it misses, scored on the same published tables as the shipped choices.

    .venv/bin/python benchmarks/calibration_alternatives.py --session DIR [DIR ...]
    make bench-calibration-alternatives SESSION="DIR [DIR ...]"

It reuses the sessions of benchmarks/calibration_tables.py (the shipped harness-value rule) and scores each
alternative on each table itself. That flatters an alternative (it is not chosen on the other tables first), so one
that does not beat the shipped choice here would not beat it on a table it never saw:

- averaging instead of choosing: the nested leave-one-out share within ±10% when `auto` predicts the held-out model
  with the geometric mean of the fits tied with the best (choice.tied_with_best) or of every usable fit but `ols`,
  instead of the one fit it chooses;
- the shape of the first picks' prior (suggest_first's fit; shipped: few_shot.FIRST_PICKS_FIT);
- the fits `auto` takes from a few models (shipped: choice.FEW_MODEL_FITS).

The last two are scored from k = 3, 5 and 8 models, picked by suggest_first, the rest predicted.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from _common import print_table, write_report
from calibration_tables import SHIPPED, TABLES, all_points, groups_of

from harness.calibration.calibrate import AUTO_CANDIDATES, points_design
from harness.calibration.choice import (
    FEW_MODEL_FITS,
    candidate_predictions,
    choose,
    error_stats,
    folds,
    tied_with_best,
)
from harness.calibration.few_shot import FIRST_PICKS_FIT, trial
from harness.calibration.fits import Design, fit_spec
from harness.calibration.suggest import suggest_first
from harness.store.results import load_runs

AVERAGES = ("chosen (shipped)", "mean of the tied", "mean of every fit")
PRIORS = ("relative", "loglog", "ols", "ops")
FEW_FIT_SETS = (FEW_MODEL_FITS, ("relative",), ("loglog",), ("ols", "relative", "loglog"))
K_VALUES = (3, 5, 8)


def _predict(design: Design, y: np.ndarray, query: Design, how: str) -> float:
    """`auto`'s prediction for `query` from these models, choosing one fit or averaging several (in log space)."""
    held = candidate_predictions(design, y, AUTO_CANDIDATES, query)
    if how == AVERAGES[0]:
        names = [choose(held, y)]
    elif how == AVERAGES[1]:
        names = tied_with_best(held, y)
    else:
        names = [name for name, predicted in held.items() if predicted is not None and name != "ols"]
    return float(np.exp(np.mean([np.log(fit_spec(name).train(design, y).predict(query)[0]) for name in names])))


def averaging_rows(points_by: dict) -> list[dict]:
    rows = []
    for table in TABLES:
        for group, points in groups_of(points_by[(table, SHIPPED.rule)]).items():
            design, y = points_design(points), points["device"].to_numpy(float)
            row = {"table": table.name, "group": group, "models": len(y)}
            for how in AVERAGES:
                predicted = np.array([_predict(design.take(keep), y[keep], design.take(np.array([i])), how)
                                      for i, keep in folds(len(y))])
                row[how] = error_stats(y, predicted)["within_10pct"]
            rows.append(row)
    return rows


def _share(points: pd.DataFrame, picks: list[str], fits: tuple[str, ...]) -> float:
    """The share within ±10% of the models not in `picks`, predicted by `auto` among `fits` from the picks."""
    done = trial(points, picks, "suggest", replace(AUTO_CANDIDATES, names=fits, few_models=0))
    return np.nan if done is None else done.within_10pct


def few_shot_rows(points_by: dict) -> list[dict]:
    """Per table and k: the share within ±10% of the rest under each prior (shipped fits) and each fit set
    (shipped prior). Greedy picks for k are the first k of the picks for the largest k, so each prior picks once."""
    rows = []
    for table in TABLES:
        points = points_by[(table, SHIPPED.rule)].reset_index(drop=True)
        k_values = [k for k in K_VALUES if k + 3 <= len(points)]
        names = points["harness_model"].tolist()
        picks = {prior: [pick.model for pick in suggest_first(points_design(points), names, prior, max(k_values))]
                 for prior in PRIORS}
        for k in k_values:
            row = {"table": table.name, "k": k}
            row |= {f"prior {prior}": _share(points, picks[prior][:k], FEW_MODEL_FITS) for prior in PRIORS}
            row |= {f"fits {'+'.join(fits)}": _share(points, picks[FIRST_PICKS_FIT][:k], fits) for fits in FEW_FIT_SETS}
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--session", nargs="+", required=not os.environ.get("HARNESS_BENCH_SESSION"),
                        default=os.environ.get("HARNESS_BENCH_SESSION", "").split() or None,
                        help="the session directories of benchmarks/calibration_tables.py (their runs pooled)")
    args = parser.parse_args()
    runs = [run for session in args.session for run in load_runs(Path(session))]
    points_by = all_points(runs)
    averaging, few = averaging_rows(points_by), few_shot_rows(points_by)
    print_table("Nested leave-one-out share within ±10%: choosing one fit against averaging fits", averaging)
    print_table(f"From k models picked by suggest: the rest within ±10%, by the picks' prior (shipped: "
                f"{FIRST_PICKS_FIT}) and by the fits `auto` takes (shipped: {'+'.join(FEW_MODEL_FITS)})", few)
    write_report("calibration_alternatives", averaging, [], [f"harness runs: {' '.join(args.session)}"],
                 tables={"few shot": few})


if __name__ == "__main__":
    sys.exit(main())
