"""Kernel-level prediction (onnxruntime, CPUS=1 or 2, this host, the loopback board or the emulated arm64 board): every
zoo family held out.

    .venv/bin/python benchmarks/kernels.py [--cpus N] [--loopback | --arm64] [--models a b ...] [--repeats N]
                                           [--iterations N] [--sessions PER_OP_SESSION [SECOND_SESSION]]
                                           [--table KERNEL_TABLE_DIR] [--designed KERNEL_TABLE_DIR]
                                           [--designed-min MINUTES] [--for]

`--loopback` runs both sessions through TARGET on this host's own sshd (benchmarks/_sshd.py), the loopback board.
`--arm64` runs them on the emulated arm64 board of the tests (tests/boards: a Cortex-A72 under QEMU's user-mode
emulation in a container), eight small models of eight families at one repeat, since a run there takes minutes.

Two `harness profile` sessions of the same zoo models, one after the other: the first with PER_OP=1 (its per-op rows
are the kernels' evidence, its headline latencies the truth), the second without the profiler (the noise floor:
the share of models whose two sessions agree within ±10% and ±5%). Then a probe of designed kernels alone on the same
device (`harness probe --models`, `--designed-min` minutes, 3 by default, none on the arm64 board, where a probe's
first packs take 10 minutes): a probe's table holds them beside its zoo models. `--sessions` scores sessions made
before instead (with the designed kernels of `--designed`, if given).

For each family: its models' rows are left out of everything (the fusion rules are learned again without them, with
the designed kernels' layouts and inner absorptions; the kernel regressors, the per-model term and the interval are
fitted on the other families and the designed kernels), then its models are predicted from their graphs alone and
compared with their measured latency in the first session.
Printed: the share within ±10% and ±5%, the median error, the 95% interval's coverage, predictions a second for
MobileNetV2 1.0/224 already loaded, and the probing time (the per-op session's wall time and the designed kernels'
probe); beside them, a MACs-only log-log line
fitted on the same other families, an oracle (each model's own measured per-op sum through the same per-model term,
fitted on the other families' measured sums, without the footprint's factor, which corrects the regressors: what
perfect kernel regressors would give), and the noise floor.
`--for` probes the designed kernels with `--for` the models (`harness probe --models --for ...`), so that each
model's kernels are read from twins at their own configurations.
`--table` also scores a kernel table probed apart (say `harness probe --models --cpus 1`: designed kernels alone, as
a phone's exported and imported table holds) on the same models as it stands, its 95% interval's coverage beside,
and times the one scale that fits them best.
Every figure is of this host at the hour it ran.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _common import ROOT, Goal, harness, headline, load_note, print_table, profile_runs, shares, shown, write_report
from _sshd import loopback_board

from harness.kernels.learn import Example, examples_from_table, learn
from harness.kernels.predictor import (
    GraphFor,
    KernelModel,
    fitted_model,
    graph_resolver,
    predict_graph,
    predictions_per_second,
    samples_of,
)
from harness.kernels.regressors import DESIGNED
from harness.kernels.rules import load_rules
from harness.kernels.table import KernelTable
from harness.kernels.training import TIME_COLUMN, ModelTable, as_table_rows, session_tables
from harness.store.results import list_sessions, load_runs

MODELS = ("mobilenet_v1_0.25_128", "mobilenet_v1_0.5_160", "mobilenet_v1_1.0_224", "mobilenet_v2_0.35_224",
          "mobilenet_v2_0.5_160", "mobilenet_v2_1.0_224", "mnasnet_0.5_224", "mnasnet_1.0_224", "squeezenet1_0",
          "squeezenet1_1", "shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "resnet18", "resnet8_cifar10", "inception_v1",
          "mobilenet_v3_small_0.75_224", "mobilenet_v3_large_1.0_224", "efficientnet_b0", "efficientnet_lite0",
          "efficientnet_lite1", "regnet_y_400mf", "ghostnet_0.5_224", "ghostnet_1.0_224", "kws_dscnn", "alexnet")
"""The zoo's image families (and keyword spotting), one to three sizes each: 25 models of 17 families."""
ARM64_MODELS = ("kws_dscnn", "resnet8_cifar10", "mobilenet_v1_0.25_128", "mobilenet_v2_0.35_224", "squeezenet1_1",
                "shufflenet_v2_x0_5", "mnasnet_0.5_224", "ghostnet_0.5_224")
"""On the emulated arm64 board a run takes minutes (QEMU's user-mode emulation starts Python and onnxruntime in each
one): the smallest model of eight families, one repeat a session."""
ENGINE = "onnxruntime"
SPEED_MODEL = "mobilenet_v2_1.0_224"
WITHIN = (0.10, 0.05)


def session_wall_s(session: Path) -> float:
    """From the first run's start to the last run's end, by the runs' own clock (a TARGET run's: when it was sent to
    the board and when its result came back)."""
    spans = []
    for run in load_runs(session):
        clock = run.get("clock_s") if isinstance(run.get("clock_s"), dict) else {}
        for start, end in (("backend_called", "backend_returned"), ("target_sent", "target_returned")):
            if start in clock and end in clock:
                spans.append((clock[start], clock[end]))
                break
    return max(end for _, end in spans) - min(start for start, _ in spans) if spans else math.nan


def macs_line(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
    """log latency = α + β log MACs on the training models, at the test models' MACs."""
    slope, intercept = np.polyfit(np.log(train["macs"]), np.log(train["latency"]), 1)
    return np.exp(intercept + slope * np.log(test["macs"]))


def designed_rows(table: KernelTable | None) -> tuple[pd.DataFrame, GraphFor]:
    """The designed kernels' rows of a probed table (none without one), and what turns any row's `graph` cell into
    its file: the table's resolver takes a graph inside it and a session's model path as it is."""
    if table is None:
        return pd.DataFrame(), Path
    rows = table.rows()
    return rows[rows["source"].eq("designed")], graph_resolver(table)


def held_out(tables: list[ModelTable], designed: KernelTable | None = None) -> pd.DataFrame:
    """Each model predicted with its whole family out of the rules, the regressors, the term and the interval; the
    designed kernels of `designed` (a probe of the same device) beside the other families' rows in every fold, as a
    probe's table holds them, and their layouts in every fold's rules, as the stored rules hold a probe's."""
    from harness.kernels.graph import Graph

    rows = as_table_rows(tables)
    extra, graph_for = designed_rows(designed)
    layouts = examples_from_table(designed.path) if designed else []
    examples = {t.model: Example(t.model, Graph.load(t.model_path, t.dims), t.rows) for t in tables}
    macs = {t.model: float(t.rows["macs"].fillna(0).sum()) for t in tables}
    models = pd.DataFrame({"model": [t.model for t in tables], "latency": [t.latency_ms for t in tables],
                           "macs": [macs[t.model] for t in tables],
                           "op_sum": [float(t.rows[TIME_COLUMN].sum()) for t in tables],
                           "rows": [len(t.rows) for t in tables],
                           "family": [rows[rows["model"] == t.model]["family"].iloc[0] for t in tables]})
    out = []
    for family in sorted(models["family"].unique()):
        train = models[models["family"] != family]
        rules = learn([examples[m] for m in train["model"]], ENGINE, layouts)
        kept = pd.concat([rows[rows["model"].isin(train["model"])], extra], ignore_index=True)
        fitted = KernelModel.fit(kept, graph_for, rules, samples=samples_of(kept, graph_for, rules))
        test = models[models["family"] == family]
        line = macs_line(train, test)
        for (_, model), macs_ms in zip(test.iterrows(), line, strict=True):
            path = next(t.model_path for t in tables if t.model == model["model"])
            ms, low, high, detail = fitted.predict(path)
            out.append({"family": family, "model": model["model"], "measured_ms": model["latency"], "kernel_ms": ms,
                        "low_ms": low, "high_ms": high, "macs_line_ms": float(macs_ms),
                        "oracle_ms": float(fitted.term @ [model["op_sum"] - fitted.profiler_ms * model["rows"], 1.0]),
                        "pooled": ",".join(detail["pooled_kinds"]), "kernels": detail["kernels"],
                        "designed": ",".join(k for k, v in detail["by_kind"].items() if v["regressor"] == DESIGNED),
                        "profiler_ms": fitted.profiler_ms})
        print(f"  {family}: {len(test)} model(s) predicted", file=sys.stderr)
    return pd.DataFrame(out)


def measure(directory: Path, args: argparse.Namespace, target: list[str]) -> tuple[Path, Path | None]:
    """The per-op session and the second one (or the sessions given), on the device `target` names (`--target URL`),
    else this host."""
    if args.sessions:
        return args.sessions[0], (args.sessions[1] if len(args.sessions) > 1 else None)
    flags = ["--cpus", str(args.cpus), "--iterations", str(args.iterations), "--warmup", "5", "--no-report", *target]
    for name, extra in (("a", ["--per-op"]), ("b", [])):
        profile_runs(directory / name, None, [], backend="local", repeats=args.repeats, models=args.models,
                     extra_flags=[*flags, *extra])
    first, second = (list_sessions(directory / name / "results")[-1] for name in ("a", "b"))
    return first, second


def probe_designed(directory: Path, args: argparse.Namespace, target: list[str]) -> tuple[KernelTable | None, float]:
    """The designed kernels (`harness probe --models`: none of the zoo's) on the same device, in `--designed-min`
    minutes, and the probe's wall time; a table given (`--designed`) instead, or none."""
    if args.designed or not args.designed_min or args.sessions:
        return (KernelTable.load(args.designed) if args.designed else None), 0.0
    started = time.monotonic()
    harness("probe", "--models", "--cpus", str(args.cpus), "--backend", "local", "--budget-min", str(args.designed_min),
            "--results-dir", str(directory / "probe"), "--name", "designed", *target,
            *(("--for", *args.models) if args.probe_for else ()))
    return KernelTable.load(directory / "probe" / "kernels" / "designed"), time.monotonic() - started


def on_board(directory: Path, args: argparse.Namespace, url: str,
             config: Path) -> tuple[Path, Path | None, KernelTable | None, float]:
    """Both sessions and the designed kernels' probe through TARGET on the board at `url`, set up first and cleaned
    after."""
    os.environ["HARNESS_SSH_CONFIG"] = str(config)
    harness("target", "setup", url)
    try:
        return (*measure(directory, args, ["--target", url]), *probe_designed(directory, args, ["--target", url]))
    finally:
        harness("target", "clean", url)


@contextmanager
def arm64_board(folder: Path) -> Iterator[tuple[str, Path]]:
    """(TARGET url, ssh_config) of the emulated arm64 board (tests/boards), removed on exit."""
    sys.path.insert(0, str(ROOT))
    from tests.boards import board_available, start_board

    usable, why = board_available("arm64")
    if not usable:
        raise SystemExit(f"no arm64 board here: {why}")
    board = start_board("arm64", folder, cpus=2, memory="2g")
    try:
        yield board.url, board.config
    finally:
        board.remove()


def table_rows(table: KernelTable, tables: list[ModelTable]) -> list[dict[str, str]]:
    """The summary rows of a kernel table probed apart, scored as it stands on the session's models, and times the
    one scale that fits those models best (their median ratio, in sample: the most a `kernels` fit could make of it)."""
    found = [(predict_graph(table, t.model_path), t.latency_ms) for t in tables]
    ratios = np.array([measured / p.ms for p, measured in found])
    inside = np.mean([p.low <= measured <= p.high for p, measured in found])
    name = f"kernel table {table.name} ({fitted_model(table).models} models in it measured end to end)"
    return [{"predictor": f"{name} as it stands", **shown(shares(1 / ratios - 1)),
             "95% interval coverage": f"{inside:.0%}"},
            {"predictor": f"{name} times its best scale, in sample", **shown(shares(np.median(ratios) / ratios - 1)),
             "95% interval coverage": "-"}]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", help=f"default: {len(MODELS)} zoo models ({len(ARM64_MODELS)} with "
                        "--arm64)")
    parser.add_argument("--repeats", type=int, help="default: 2 (1 with --arm64)")
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--sessions", nargs="+", type=Path, help="a per-op session and, optionally, a second one")
    parser.add_argument("--cpus", type=int, default=1)
    parser.add_argument("--table", type=Path, help="a kernel table's folder, scored as it stands on the same models")
    parser.add_argument("--designed", type=Path, help="a kernel table's folder whose designed kernels join every fold "
                        "(default: probed after the sessions, on the same device)")
    parser.add_argument("--designed-min", type=float,
                        help="the designed kernels' probe budget in minutes (default 3, 0 with --arm64, where the "
                             "probe's first packs alone take 10 minutes; 0: none)")
    parser.add_argument("--for", dest="probe_for", action="store_true",
                        help="the designed kernels' probe also times the models' own configurations (--for)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--loopback", action="store_true",
                       help="both sessions through TARGET on this host's sshd on loopback (the loopback board)")
    where.add_argument("--arm64", action="store_true",
                       help="both sessions through TARGET on the emulated arm64 board (tests/boards: a Cortex-A72 "
                            "under QEMU in a container, 2 GiB)")
    args = parser.parse_args()
    args.models = args.models or list(ARM64_MODELS if args.arm64 else MODELS)
    args.repeats = args.repeats or (1 if args.arm64 else 2)
    args.designed_min = (0.0 if args.arm64 else 3.0) if args.designed_min is None else args.designed_min
    notes = [load_note("before the sessions")]
    directory = Path(tempfile.mkdtemp(prefix="bench-kernels-"))
    if args.loopback:
        with loopback_board(directory / "sshd") as (url, config):
            first, second, designed, designed_s = on_board(directory, args, url, config)
    elif args.arm64:
        with arm64_board(directory / "arm64") as (url, config):
            first, second, designed, designed_s = on_board(directory, args, url, config)
    else:  # this host, or the sessions given, scored as they were
        first, second = measure(directory, args, [])
        designed, designed_s = probe_designed(directory, args, [])
    notes.append(load_note("after the sessions"))
    tables = [t for t in session_tables([first], ENGINE) if t.latency_ms > 0]
    started = time.monotonic()
    scored = held_out(tables, designed)
    fit_s = time.monotonic() - started
    errors = (scored["kernel_ms"] / scored["measured_ms"] - 1).to_numpy()
    macs_errors = (scored["macs_line_ms"] / scored["measured_ms"] - 1).to_numpy()
    oracle_errors = (scored["oracle_ms"] / scored["measured_ms"] - 1).to_numpy()
    inside = (scored["low_ms"] <= scored["measured_ms"]) & (scored["measured_ms"] <= scored["high_ms"])
    coverage = float(inside.mean())
    all_rows = as_table_rows(tables)
    model = KernelModel.fit(all_rows, Path, load_rules(ENGINE))
    speed_path = next((t.model_path for t in tables if t.model == SPEED_MODEL), tables[0].model_path)
    rate = predictions_per_second(model, speed_path)
    floor: dict[str, Any] = {}
    if second is not None:
        a, b = headline(first), headline(second)
        both = sorted(set(a) & set(b))
        floor = shares(np.array([b[m] / a[m] - 1 for m in both])) | {"models": len(both)}
    probing_s = session_wall_s(first) + designed_s
    print_table("Held-out families: each model predicted from its graph, its family out of every setting", [
        {"model": r.model, "family": r.family, "measured ms": r.measured_ms, "kernel ms": r.kernel_ms,
         "error": f"{r.kernel_ms / r.measured_ms - 1:+.1%}", "95% interval": f"{r.low_ms:.3g}–{r.high_ms:.3g}",
         "MACs line error": f"{r.macs_line_ms / r.measured_ms - 1:+.1%}", "pooled kinds": r.pooled,
         "designed kinds": r.designed}
        for r in scored.itertuples()])
    summary = [
        {"predictor": "kernels (per-kind regressors, rows less the profiler's cost; (a·Σ + b)·the footprint's factor)",
         **shown(shares(errors)),
         "95% interval coverage": f"{coverage:.0%}"},
        {"predictor": "MACs-only log-log line", **shown(shares(macs_errors)), "95% interval coverage": "-"},
        {"predictor": "oracle: the model's own measured per-op sum less the profiler's cost, same a·Σ + b",
         **shown(shares(oracle_errors)), "95% interval coverage": "-"},
        {"predictor": f"noise floor: a second session against the first ({floor.pop('models', 0)} models)",
         **(shown(floor) if floor else {}), "95% interval coverage": "-"},
    ] + (table_rows(KernelTable.load(args.table), tables) if args.table else [])
    print_table(f"{len(scored)} models of {scored['family'].nunique()} families, onnxruntime, CPUS={args.cpus}, "
                f"{'the loopback board' if args.loopback else 'the arm64 board' if args.arm64 else 'this host'}",
                summary)
    print(f"prediction rate: {rate:.0f} a second ({SPEED_MODEL}, graph loaded); probing (the per-op session and "
          f"the designed kernels' probe, {designed_s / 60:.1f} min): {probing_s / 60:.1f} min; held-out fits: "
          f"{fit_s:.0f} s; designed kernels ({designed.path if designed else 'none'}) carried a kind of "
          f"{scored['designed'].str.len().gt(0).sum()} models; the profiler's cost a row, "
          f"as the folds fitted it: {scored['profiler_ms'].min():.4f}–{scored['profiler_ms'].max():.4f} ms")
    within, goal = shares(errors)["within ±10%"], 0.95 if args.cpus == 1 else 0.90
    goals = [
        Goal(f"within ±10% (held-out families, CPUS={args.cpus})", f"≥ {goal:.0%} or within 3 points of the floor",
             f"{within:.0%}", within >= goal or (bool(floor) and within >= floor["within ±10%"] - 0.03),
             f"noise floor {floor.get('within ±10%', math.nan):.0%}"),
        Goal("within ±5%", "≥ 75%", f"{shares(errors)['within ±5%']:.0%}", shares(errors)["within ±5%"] >= 0.75),
        Goal("95% interval coverage", "90–98%", f"{coverage:.0%}", 0.90 <= coverage <= 0.98),
        Goal("graph predictions a second", "≥ 100", f"{rate:.0f}", rate >= 100),
        Goal("probing time", "≤ 20 min", f"{probing_s / 60:.1f} min", probing_s <= 1200),
    ]
    name = "kernels" + ("" if args.cpus == 1 else f"-cpus{args.cpus}") + ("-loopback" if args.loopback else "") \
        + ("-arm64" if args.arm64 else "")
    write_report(name, summary, goals, notes, raw={"scored": scored.to_dict(orient="records"),
                                                   "sessions": [str(first), str(second)]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
