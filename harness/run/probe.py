"""`harness probe`: measure one engine's kernels on one device, within a time budget, and write its kernel table.

Every measurement is an ordinary session (run.assemble.start_session, as `harness profile` runs), with PER_OP=1,
under the profile's limits (CPUS, MEMORY, BACKEND or TARGET) and its protocol: fresh processes, interleaved shuffled
rounds, a warmup and a timed phase for the headline latency, then the per-op phase. Three phases:

1. designed kernels, stratified (designed.sample), packed into probe graphs: the first PRICING_PACKS whatever the
   budget, since their runs price the device (a run's fixed seconds and its milliseconds per MAC, from which the
   rest is sized to the budget), then as many of the others as fit FIRST_SHARE of it; then, with `--for`, designed
   kernels at the configurations of the user's own graphs (designed_for), as many as fit FOR_SHARE of what is left;
2. zoo models (`--models`), those whose estimated runs fit ZOO_SHARE of the budget left, in the order given: one
   session a repeat, the first now and the others spread over the budget left between the next phase's rounds
   (ZooRepeats), each node's time the median of its repeats;
3. designed kernels, adaptively (adaptive.next_round), round after round while one fits in the budget left less
   the zoo repeats still to run; the last round shrinks to the probe graphs that fit what is left.

The repeats, iterations and warmup are PROBE_DEFAULTS where the profile leaves them at env.template's defaults
(500 iterations x 7 repeats of each probe graph would take the whole budget for a few graphs).
"""

from __future__ import annotations

import math
import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from harness.analysis.boards import board_key
from harness.core import metric_registry
from harness.core.config import DeviceProfile
from harness.core.errors import ConfigError, DataError, ModelError
from harness.core.records import RunRecord
from harness.kernels.adaptive import next_round
from harness.kernels.designed import CONV_STRATA, CONV_WEIGHT, KINDS, Kernel, engine_kinds, macs, sample
from harness.kernels.designed_for import kernels_for
from harness.kernels.designed_graphs import write_probe
from harness.kernels.packing import pack
from harness.kernels.probed import ModelRuns, kernel_times, per_op_tables, session_rows
from harness.kernels.table import GRAPHS_DIR, KernelTable, kernels_root, now_utc, table_name, write_table
from harness.models.facts import onnx_facts
from harness.models.resolve import resolve_model
from harness.run.assemble import SessionRequest, start_session
from harness.store.results import load_runs
from harness.zoo import parse, unbuildable

PROBE_DEFAULTS = {"REPEATS": 3, "ITERATIONS": 30, "WARMUP": 5, "MAX_REPEATS": 3}
"""Three repeats of 30 timed inferences: the issue's own check of per-op tables ran 3 x 30; MAX_REPEATS at REPEATS
keeps adaptive repeats from spending the budget on one noisy graph."""
DEFAULT_MODELS = ("mobilenet_v2_0.5_160", "mobilenet_v1_0.5_160", "shufflenet_v2_x0_5", "squeezenet1_1",
                  "mnasnet_0.5_224", "mobilenet_v3_small_0.75_224", "efficientnet_lite0", "ghostnet_0.5_224",
                  "resnet8_cifar10", "kws_dscnn", "resnet18", "inception_v1")
"""Small image models of ten families: depthwise and dense convolutions, shuffles, squeeze-excite, concat, pooling."""


def first_round(kinds: Sequence[str]) -> int:
    """Kernels in the stratified first round: every kind six times, convolution four times as often, so that every
    (kernel size, stride, grouping) stratum of convolution is drawn once."""
    return len(CONV_STRATA) // CONV_WEIGHT * (len(kinds) - 1 + CONV_WEIGHT)


FIRST_ROUND = first_round(KINDS)
"""The first round of an engine that runs every designed kind (onnxruntime)."""
PRICING_PACKS = 2
"""The stratified round's first packs run before anything else whatever the budget: their runs price the device."""
FIRST_SHARE = 0.5
"""The rest of the stratified round gets at most this share of the budget left after pricing, in whole packs (on this
host the whole round fits in a minute; on the emulated arm64 board two packs of 22 kernels took 590 s); the zoo
models get ZOO_SHARE of what is left then."""
ROUND_KERNELS = 96
FOR_SHARE = 0.5
"""`--for`'s kernels get at most this share of the budget left after the stratified round."""
ZOO_SHARE = 0.5
PROFILED_CALLS = (5, 50)
"""The per-op phase runs min(WARMUP, 5) unprofiled and min(ITERATIONS, 50) profiled calls (docs/per-op.md)."""
Say = Callable[[str], None]


@dataclass(frozen=True)
class ProbeRequest:
    """What to probe beside the device profile."""

    models: tuple[str, ...] = DEFAULT_MODELS
    budget_s: float = 1200.0
    name: str | None = None
    seed: int = 0
    designed: int | None = None
    """at most this many designed kernels (None: as many as the budget allows)"""
    for_models: tuple[str, ...] = ()
    """models (zoo names or ONNX files) whose convolutions and fully connected layers are probed at their own
    configurations"""


@dataclass
class Costs:
    """A run's price on this device: a probe graph's run takes `graph_run_s` (packs are sized alike: at most
    PACK_KERNELS kernels and PACK_MACS); a model's, `fixed_s` (start, load, teardown) plus its calls at
    `ms_per_mac`."""

    graph_run_s: float
    fixed_s: float
    ms_per_mac: float
    calls: int
    repeats: int

    def graphs_s(self, graphs: int) -> float:
        """Seconds for a session of this many probe graphs."""
        return self.repeats * graphs * self.graph_run_s

    def models_s(self, work: Sequence[int]) -> float:
        """Seconds for a session of models of these MACs."""
        return self.repeats * sum(self.fixed_s + self.calls * max(w, 1) * self.ms_per_mac / 1000 for w in work)


@dataclass
class ZooRepeats:
    """The zoo models' repeats, one session each, spread over the probe: a machine's slow spells last seconds to a
    minute and slow every run inside them alike (on this host a probe's three interleaved rounds of ten models, run
    back to back in 36 s, all came out 10–60% slow, 9 models of 10 off by over 10% between rounds, where the models'
    sessions an hour apart agreed within 10%), so repeats minutes apart outvote a spell that repeats seconds apart
    share. `due_s`: when each repeat still to run is due, in seconds since the probe started."""

    models: list[str]
    work: list[int]
    due_s: list[float]
    ran: int = 0
    runs: ModelRuns = field(default_factory=dict)
    """the repeats' runs so far, each with its per-op table"""

    @classmethod
    def spread(cls, models: list[str], work: list[int], repeats: int, now_s: float, left_s: float) -> ZooRepeats:
        """`repeats` repeats, the first due now and the others evenly over the `left_s` seconds left."""
        return cls(models, work, [now_s + i * left_s / max(1, repeats) for i in range(max(1, repeats))])

    def reserve_s(self, costs: Costs) -> float:
        """Seconds the repeats still to run will take."""
        return len(self.due_s) * replace(costs, repeats=1).models_s(self.work)


@dataclass
class Probe:
    """A probe in progress: its sessions, rows, kernels and the clock."""

    profile: DeviceProfile
    request: ProbeRequest
    work: Path
    say: Say
    started: float = field(default_factory=time.monotonic)
    sessions: list[str] = field(default_factory=list)
    frames: list[pd.DataFrame] = field(default_factory=list)
    kernels: list[Kernel] = field(default_factory=list)
    graphs: dict[str, Path] = field(default_factory=dict)
    runs: list[RunRecord] = field(default_factory=list)
    pack_macs: dict[str, int] = field(default_factory=dict)
    """a probe graph's name -> the MACs of its kernels"""
    zoo: ZooRepeats | None = None
    probed_for: int = 0
    """kernels probed at the request's `for_models`, which the request's `designed` does not count"""

    @property
    def sampled(self) -> int:
        """Designed kernels sampled so far (stratified and adaptive), which the request's `designed` caps."""
        return len(self.kernels) - self.probed_for

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    @property
    def left_s(self) -> float:
        return self.request.budget_s - self.elapsed_s

    def session(self, paths: Sequence[str], profile: DeviceProfile | None = None,
                seed: int = 0) -> tuple[Path, list[RunRecord]]:
        """One session of `paths` (under `profile`, the probe's by default) -> its folder and its runs."""
        start = start_session(profile or self.profile,
                              SessionRequest(models=tuple(paths), seed=self.request.seed + seed))
        for note in start.new_notes:
            self.say(f"  note: {note}")
        started = start.session
        started.run()
        session_dir = started.store.path
        self.sessions.append(session_dir.name)
        runs = load_runs(session_dir)
        self.runs += runs
        self.graphs.update({f"{run.model_name}.onnx": Path(run.line["model_path"]) for run in runs
                            if run.ok and run.model_name not in self.pack_macs
                            and Path(str(run.line.get("model_path") or "")).is_file()})
        return session_dir, runs

    def zoo_repeat(self, left_out: Sequence[str] = ()) -> None:
        """Run the zoo models' next repeat, one session of one repeat; its runs join the repeats' before it."""
        zoo = self.zoo
        assert zoo is not None and zoo.due_s
        zoo.due_s.pop(0)
        began = time.monotonic()
        once = replace(self.profile, repeats=1, max_repeats=1)
        session_dir, runs = self.session(zoo.models, once, seed=zoo.ran)
        found = per_op_tables(session_dir)
        for model, pairs in found.items():
            zoo.runs.setdefault(model, []).extend(pairs)
        zoo.ran += 1
        rows = sum(len(table) for pairs in found.values() for _, table in pairs if table is not None)
        self.say(f"zoo models, repeat {zoo.ran} of {zoo.ran + len(zoo.due_s)}: {len(zoo.models)} models, "
                 f"{sum(run.ok for run in runs)} runs ok, {rows} rows, {time.monotonic() - began:.0f} s "
                 f"(session {session_dir.name})" + (f"; left out for the budget: {', '.join(left_out)}"
                                                    if left_out else ""))

    def zoo_due(self) -> bool:
        return self.zoo is not None and bool(self.zoo.due_s) and self.elapsed_s >= self.zoo.due_s[0]

    def zoo_reserve_s(self, costs: Costs) -> float:
        return self.zoo.reserve_s(costs) if self.zoo is not None else 0.0

    def designed_round(self, kernels: list[Kernel], phase: str, capped: bool = True) -> None:
        if capped and self.request.designed is not None:  # the first in sampling order (k0000, ...): every kind in turn
            kernels = sorted(kernels, key=lambda k: k.name)[:max(0, self.request.designed - self.sampled)]
        if not kernels:
            return
        designed = {}
        for members in pack(kernels):
            path = write_probe(members, len(self.pack_macs), self.work / GRAPHS_DIR, self.profile.runtime)
            self.pack_macs[path.stem] = sum(macs(k) for k in members)
            designed[path.stem] = path
            self.graphs[path.name] = path
            self.graphs.update({f"{k.name}.onnx": self.work / GRAPHS_DIR / f"{k.name}.onnx" for k in members})
        self.kernels += kernels
        began = time.monotonic()
        session_dir, runs = self.session([str(p) for p in designed.values()])
        rows = session_rows(per_op_tables(session_dir), designed)
        if len(rows):
            self.frames.append(rows)
        self.say(f"{phase}: {len(kernels)} kernels in {len(designed)} probe graphs, {sum(run.ok for run in runs)} "
                 f"runs ok, {len(rows)} rows, {time.monotonic() - began:.0f} s (session {session_dir.name})")

    def for_round(self, costs: Costs) -> dict[str, list[str]]:
        """Designed kernels at the configurations of the request's `for_models`, then of its zoo models, those that
        fit FOR_SHARE of the budget left -> each model's kernels that ran, by name (the table's provenance). The zoo
        models' too: a table's term is fitted on its models' kernel sums, which must be carried as the user's
        model's are, by twins where they have some (harness.kernels.regressors.Twins)."""
        graphs = {name: resolve_model(name, check_runtime=False).path
                  for name in dict.fromkeys((*self.request.for_models, *self.request.models))}
        kernels, names = kernels_for(graphs, len(self.kernels))
        packs = pack(kernels)
        fit = [k for members in fitting(packs, costs, self.left_s * FOR_SHARE) for k in members]
        self.designed_round(fit, f"designed kernels for {', '.join(self.request.for_models)} and the zoo models" + (
            f" ({len(fit)} of {len(kernels)} fit the budget)" if len(fit) < len(kernels) else ""), capped=False)
        self.probed_for += len(fit)
        ran = {k.name for k in self.kernels}
        return {model: [name for name in found if name in ran] for model, found in names.items()}

    def costs(self) -> Costs:
        """The device's price per run, from the designed runs so far: means, not medians, since a loaded machine's
        slow runs are part of what the next round will cost; milliseconds per MAC as the ratio of the sums, which a
        graph of memory-bound kernels (few MACs, much time) does not run away with."""
        profile = self.profile
        calls = profile.warmup + profile.iterations + min(profile.warmup, PROFILED_CALLS[0]) + min(
            profile.iterations, PROFILED_CALLS[1])
        runs = [(run, latency) for run in self.runs if run.ok and run.model_name in self.pack_macs
                and (latency := metric_registry.get(metric_registry.LATENCY_MEAN).value(run.line))]
        if not runs:
            raise DataError("harness probe: no designed probe graph ran; see the session's errors "
                            f"(harness report --session {self.sessions[-1] if self.sessions else 'latest'})")
        seconds = [run.result.runtime_s or 0.0 for run, _ in runs]
        fixed = [max(0.0, s - calls * latency / 1000) for s, (_, latency) in zip(seconds, runs, strict=True)]
        rate = sum(latency for _, latency in runs) / max(1, sum(self.pack_macs[run.model_name] for run, _ in runs))
        return Costs(statistics.fmean(seconds), statistics.fmean(fixed), rate, calls, profile.repeats)


def probe_profile(profile: DeviceProfile) -> DeviceProfile:
    """The profile with PER_OP=1 and PROBE_DEFAULTS where it leaves REPEATS, ITERATIONS, WARMUP or MAX_REPEATS at
    env.template's defaults."""
    if profile.runtime == "litert":
        raise ConfigError("RUNTIME=litert: LiteRT's Python interpreter gives no per-op profile, so the harness cannot "
                          "probe it here; use `harness probe export --engine litert DIR`, run the script it writes "
                          "on the device, and `harness probe import` its output")
    chosen = {name: value for name, value in PROBE_DEFAULTS.items()
              if profile.sources.get(name) in ("default", "env.template")}
    return replace(profile, per_op=True, repeats=chosen.get("REPEATS", profile.repeats),
                   iterations=chosen.get("ITERATIONS", profile.iterations),
                   warmup=chosen.get("WARMUP", profile.warmup), max_repeats=chosen.get("MAX_REPEATS",
                                                                                        profile.max_repeats),
                   sources={**profile.sources, **dict.fromkeys(chosen, "harness probe"), "PER_OP": "harness probe"})


def fitting(packs: Sequence[Sequence[Kernel]], costs: Costs, seconds: float) -> list[Sequence[Kernel]]:
    """The packs, in order, whose estimated runs fit in `seconds` together."""
    kept: list[Sequence[Kernel]] = []
    for members in packs:
        if costs.graphs_s(len(kept) + 1) > seconds:
            break
        kept.append(members)
    return kept


def model_macs(name: str) -> int:
    """A zoo model's MACs, which price its runs."""
    return int(onnx_facts(resolve_model(name, check_runtime=False).path).get("macs") or 0)


def check_models(names: Sequence[str], flag: str = "--models") -> None:
    """Every `--models` name a file or a zoo model this install can build, before anything runs: a probe that ends at
    its zoo phase loses the designed kernels it measured (given `resnet8` for `resnet8_cifar10`, an ncnn probe spent
    2.6 minutes and wrote nothing)."""
    for name in names:
        if not Path(name).expanduser().exists():
            try:
                parse(name)
            except ModelError as error:
                raise ConfigError(f"{flag}: {error}, or give a path to a model file") from None
    missing = unbuildable(names)
    if missing:
        raise ConfigError(f"harness probe: the zoo models {', '.join(missing)} need the zoo extra (torch, "
                          "torchvision, onnxscript), which is missing: run `make setup-zoo`, or probe designed kernels "
                          "only (`--models` with no name)")


def zoo_fitting(models: Sequence[str], costs: Costs, seconds: float) -> tuple[list[str], list[str]]:
    """The models (in order) whose estimated runs fit in `seconds`, and those left out."""
    kept, left, spent = [], [], 0.0
    for name in models:
        estimate = costs.models_s([model_macs(name)])
        if spent + estimate <= seconds:
            kept.append(name)
            spent += estimate
        else:
            left.append(name)
    return kept, left


def device_of(profile: DeviceProfile, runs: Sequence[RunRecord]) -> tuple[str, str]:
    """(device, CPU model): DEVICE_NAME where the user set it, else the board's host name for a target, else host."""
    first = next((run for run in runs if run.ok), None)
    provenance = first.provenance if first is not None else {}
    cpu = str(((first.line.get("board") or {}) if first else {}).get("cpu_model") or provenance.get("host_cpu_model")
              or "")
    if profile.sources.get("DEVICE_NAME") not in ("default", "env.template"):
        return profile.device_name, cpu
    if profile.target and first is not None:
        return board_key(first)[0], cpu
    return "host", cpu


def probe(profile: DeviceProfile, request: ProbeRequest, say: Say = lambda line: None) -> KernelTable:
    """Probe the device of `profile` (this host through its backend, or TARGET's board) and write its kernel table
    under RESULTS_DIR/kernels/; `say` gets one line per phase."""
    profile = probe_profile(profile)
    check_models(request.models)
    check_models(request.for_models, "--for")
    threads = max(1, math.ceil(profile.cpus))
    root = kernels_root(Path(profile.results_dir))
    work = root / f".probe-{time.strftime('%Y%m%d-%H%M%S')}"
    state = Probe(profile, request, work, say)
    try:
        kinds = engine_kinds(profile.runtime)
        packs = pack(sample(first_round(kinds), request.seed, kinds))
        state.designed_round([k for members in packs[:PRICING_PACKS] for k in members],
                             "designed kernels, stratified, first packs (they price the device)")
        costs = state.costs()
        rest = fitting(packs[PRICING_PACKS:], costs, state.left_s * FIRST_SHARE)
        state.designed_round([k for members in rest for k in members], "designed kernels, stratified"
                             + (f" ({len(rest)} of {len(packs) - PRICING_PACKS} probe graphs fit the budget)"
                                if len(rest) < len(packs) - PRICING_PACKS else ""))
        costs = state.costs()
        probed_for = state.for_round(costs) if request.for_models else {}
        costs = state.costs()
        kept, left = zoo_fitting(request.models, costs, max(0.0, state.left_s * ZOO_SHARE))
        if kept:
            state.zoo = ZooRepeats.spread(kept, [model_macs(name) for name in kept], profile.repeats,
                                          state.elapsed_s, state.left_s)
            state.zoo_repeat(left)
        elif request.models:
            say(f"zoo models: none fits the budget left ({max(0.0, state.left_s):.0f} s); left out: {', '.join(left)}")
        rounds = 0
        while request.designed is None or state.sampled < request.designed:
            if state.zoo_due():
                state.zoo_repeat()
            count = ROUND_KERNELS if request.designed is None else min(ROUND_KERNELS,
                                                                       request.designed - state.sampled)
            times = {str(kernel): float(ms) for kernel, ms in kernel_times(_designed_rows(state)).items()}
            kernels = next_round(state.kernels, times, count, request.seed + rounds + 1, len(state.kernels), kinds)
            costs = state.costs()  # priced again after every round: the machine's load moves
            packs = pack(kernels)
            # the last round shrinks to what the budget has left after the zoo repeats still to run
            fit = fitting(packs, costs, state.left_s - state.zoo_reserve_s(costs))
            if not fit:
                break
            rounds += 1
            state.designed_round([k for members in fit for k in members], f"designed kernels, adaptive round {rounds}"
                                 + (f" ({len(fit)} of {len(packs)} probe graphs fit the budget)"
                                    if len(fit) < len(packs) else ""))
            if len(fit) < len(packs):
                break
        while state.zoo is not None and state.zoo.due_s:
            state.zoo_repeat()
        rows = _rows(state)
        device, cpu = device_of(profile, state.runs)
        name = request.name or table_name(device, profile.runtime, threads, "fp32")
        meta = {"name": name, "device": device, "engine": profile.runtime, "threads": threads, "cpus": profile.cpus,
                "precision": "fp32", "created": now_utc(), "probing_s": round(time.monotonic() - state.started, 1),
                "sessions": state.sessions, "source": f"harness probe on {profile.target or 'this host'}",
                "cpu": cpu, **({"for": probed_for} if probed_for else {})}
        table = write_table(root / name, meta, rows, state.graphs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    say(f"kernel table {table.name}: {len(rows)} rows ({int((rows['source'] == 'designed').sum())} designed), "
        f"{meta['probing_s']:.0f} s of probing -> {table.path}")
    return table


def _designed_rows(state: Probe) -> pd.DataFrame:
    if not state.frames:
        raise DataError("harness probe: no run gave a per-op profile; see the sessions' errors "
                        f"({', '.join(state.sessions)})")
    return pd.concat(state.frames, ignore_index=True)


def _rows(state: Probe) -> pd.DataFrame:
    """The designed rows, then the zoo models' rows over all their repeats."""
    zoo = session_rows(state.zoo.runs, {}) if state.zoo is not None else pd.DataFrame()
    return pd.concat([_designed_rows(state), zoo], ignore_index=True)
