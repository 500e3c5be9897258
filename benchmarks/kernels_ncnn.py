"""Kernel-level prediction under ncnn on this host: a probe's table against a session of other zoo models, each model's
family held out of everything (its rows, the layer joins and rules, the regressors, the term).

    .venv/bin/python benchmarks/kernels_ncnn.py [--cpus N] [--budget-min M] [--for]
                                                [--table KERNEL_TABLE_DIR --session DIR]

A session of eleven zoo models of eleven families (`harness profile --runtime ncnn`, 3 repeats), then a default probe
(`harness probe --runtime ncnn`, `--budget-min` minutes: designed kernels and the default twelve zoo models). Each
session model is predicted from its graph by the table less its family's rows, and compared with its latency in the
session. Printed: within ±10% and ±5%, the median error, the 95% interval's coverage, and each model's error; beside
them the noise floor, the models both the session and the probe measured (its zoo repeats), their latencies
compared. `--for` probes with `harness probe --for` the session's models, as a user probes for the models they
will predict, and scores the table twice: less the rows of the kernels probed for the models, and whole (the same
probe's other rows, so the difference is the kernels' own). `--table` and `--session` score a table and a session
made before. Every figure is of this host at the hour it ran."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import pandas as pd
from _common import harness, headline, print_table, profile_runs, shares, shown

from harness.kernels.predictor import KernelModel, engine_evidence, graph_resolver, samples_of
from harness.kernels.table import KernelTable
from harness.models.families import model_family
from harness.models.resolve import resolve_model

SESSION_MODELS = ("mobilenet_v1_0.5_160", "ghostnet_0.5_224", "kws_dscnn", "efficientnet_lite0",
                  "mobilenet_v3_small_0.75_224", "resnet18", "inception_v1", "regnet_y_400mf", "mobilenet_v2_1.0_224",
                  "mnasnet_1.0_224", "shufflenet_v2_x1_0")


def without_probed_for(rows: pd.DataFrame, meta: dict) -> pd.DataFrame:
    """The rows less the probe graphs that held kernels probed for the models (`harness probe --for`)."""
    names = {name for found in (meta.get("for") or {}).values() for name in found}
    return rows[~rows["model"].isin(set(rows.loc[rows["kernel"].isin(names), "model"]))]


def score(table: KernelTable, measured: dict[str, float], rows: pd.DataFrame) -> list[dict[str, object]]:
    """Each measured model predicted by the table's `rows` without its family's."""
    graph_for = graph_resolver(table)
    fitted: dict[str, KernelModel] = {}
    out: list[dict[str, object]] = []
    for model, ms in sorted(measured.items()):
        family = model_family(model)
        if family not in fitted:
            kept = rows[rows["family"] != family]
            rules, joins = engine_evidence("ncnn", kept, graph_for)
            fitted[family] = KernelModel.fit(kept, graph_for, rules, samples=samples_of(kept, graph_for, rules, joins))
        predicted, low, high, _ = fitted[family].predict(resolve_model(model, check_runtime=False).path)
        out.append({"model": model, "measured ms": ms, "predicted ms": predicted, "error": predicted / ms - 1,
                     "interval": f"{low:.3g}–{high:.3g}", "covered": low <= ms <= high})
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cpus", type=int, default=1)
    parser.add_argument("--budget-min", type=float, default=14.0)
    parser.add_argument("--table", type=Path)
    parser.add_argument("--session", type=Path)
    parser.add_argument("--for", dest="probe_for", action="store_true",
                        help="probe with --for the session's models and score the table less and with their kernels")
    args = parser.parse_args(argv)
    if (args.table is None) != (args.session is None):
        parser.error("--table and --session go together")
    if args.table is None:
        work = Path(tempfile.mkdtemp(prefix="bench-kernels-ncnn-"))
        print(f"sessions and table under {work}", file=sys.stderr)
        profile_runs(work, None, [], backend="local", repeats=3, models=SESSION_MODELS,
                     extra_flags=["--runtime", "ncnn", "--cpus", str(args.cpus)])
        (args.session,) = [path for path in (work / "results").iterdir() if (path / "runs.jsonl").is_file()]
        harness("probe", "--runtime", "ncnn", "--cpus", str(args.cpus), "--backend", "local",
                "--budget-min", str(args.budget_min), "--results-dir", str(work / "results"),
                *(("--for", *SESSION_MODELS) if args.probe_for else ()))
        args.table = work / "results" / "kernels" / f"host-ncnn-{args.cpus}t-fp32"
    table = KernelTable.load(args.table)
    measured = headline(args.session)
    variants = {"kernel table": table.rows()}
    if table.meta.get("for"):
        variants = {"kernel table less the kernels probed for the models": without_probed_for(table.rows(), table.meta),
                    "kernel table with them": table.rows()}
    summary = []
    for label, rows in variants.items():
        scored = score(table, measured, rows)
        print_table(f"ncnn, CPUS={args.cpus}, {label}: each family held out ({table.name}, "
                    f"{table.meta.get('probing_s')} s of probing)",
                    [{**row, "error": f"{float(str(row['error'])):+.1%}"} for row in scored])
        summary.append({"": label, **shown(shares(float(str(row["error"])) for row in scored)),
                        "95% interval covers": f"{statistics.fmean(bool(row['covered']) for row in scored):.0%}",
                        "models": len(scored)})
    probed = table.rows().query("source == 'zoo'").groupby("model")["model_latency_ms"].first()
    both = [measured[m] / probed[m] - 1 for m in measured if m in probed.index]
    floor = shown(shares(both)) if both else {}
    print_table("held-out families and the noise floor", [
        *summary, {"": "noise floor: session against the probe's repeats", **floor, "95% interval covers": "",
                   "models": len(both)}])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
