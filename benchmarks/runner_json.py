"""What harness.measure.lean_stdlib buys the runner: its start and its own peak memory with the stand-ins (json's C
accelerator called directly, a five-line suppress) against the same runner on the standard library's json and
contextlib.

    .venv/bin/python benchmarks/runner_json.py [--rounds 30]

Each variant is a fresh interpreter started as a backend starts the runner (`python -I -S`, the package's directory
on the path) that imports harness.measure.runner, reads a spec-sized JSON text, writes a result-sized one, and exits
with os._exit as the runner does. "stdlib" puts a module holding json.loads, json.dumps and contextlib.suppress in
lean_stdlib's place before the import, so everything else is the same code. Start: the child's wall time from spawn
to exit, seen by this process. Peak: the child's own high-water mark (VmHWM, read last), the memory a run's cgroup
is charged for its runner before the script starts. The variants alternate, in mirrored order every other round;
medians, and the ratio stdlib / lean, both from this one run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from _common import ROOT, compile_bytecode, load_note, print_table, write_report

SPEC = {"script": "bench.py", "model": "model.onnx", "script_args": ["--dim", "seq=8"], "threads": 1, "cpus": 1.0,
        "iterations": 100, "warmup": 10, "batch_size": 1, "cpu_mode": "cpuset", "sample_interval_ms": 10.0}
RESULT = {"status": "ok", "runtime_s": 0.5, "latency": {"p50_ms": 1.2, "p99_ms": 3.4}, "phases": ["load", "steady"],
          "stderr_tail": "", "memory": {"peak_mib": 35.7, "avg_mib": 20.1}, "clock_s": {"started": 1.0}}
STDLIB_IN_PLACE = ("import contextlib, json, sys, types; module = types.ModuleType('harness.measure.lean_stdlib'); "
                   "module.loads, module.dumps, module.suppress = json.loads, json.dumps, contextlib.suppress; "
                   "sys.modules[module.__name__] = module; ")
VARIANTS = {"lean": "", "stdlib": STDLIB_IN_PLACE}


def child_code(variant: str) -> str:
    return (f"import sys; sys.path.append({str(ROOT)!r}); {VARIANTS[variant]}"
            "from harness.measure import lean_stdlib, runner; import os; "
            f"lean_stdlib.loads(lean_stdlib.dumps({SPEC!r})); lean_stdlib.dumps({RESULT!r}); "
            "status = open('/proc/self/status').read(); "
            "os.write(1, status.split('VmHWM:')[1].split()[0].encode()); os._exit(0)")


def one_start(variant: str) -> tuple[float, float]:
    """(wall seconds from spawn to exit, peak RSS in MiB) of one runner-like start."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-I", "-S", "-c", child_code(variant)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True)
    wall_s = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the {variant} runner start failed ({done.returncode}): {done.stderr.strip()[-300:]}")
    return wall_s, int(done.stdout) / 1024


def measure(rounds: int) -> dict[str, dict[str, list[float]]]:
    samples: dict[str, dict[str, list[float]]] = {name: {"start_ms": [], "peak_mib": []} for name in VARIANTS}
    for variant in VARIANTS:  # one untimed start each: the page cache holds both variants' files from here on
        one_start(variant)
    for index in range(rounds):
        for variant in list(VARIANTS)[:: 1 if index % 2 == 0 else -1]:
            wall_s, peak_mib = one_start(variant)
            samples[variant]["start_ms"].append(wall_s * 1000)
            samples[variant]["peak_mib"].append(peak_mib)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    notes = [compile_bytecode(), load_note("before")]
    samples = measure(args.rounds)
    notes.append(load_note("after"))
    medians = {name: {key: statistics.median(values) for key, values in figures.items()}
               for name, figures in samples.items()}
    rows = [{"runner on": name, "start ms (median)": medians[name]["start_ms"],
             "peak RSS MiB (median)": medians[name]["peak_mib"]} for name in VARIANTS]
    rows.append({"runner on": "stdlib / lean", **{
        label: medians["stdlib"][key] / medians["lean"][key]
        for label, key in (("start ms (median)", "start_ms"), ("peak RSS MiB (median)", "peak_mib"))}})
    rows.append({"runner on": "stdlib - lean", **{
        label: medians["stdlib"][key] - medians["lean"][key]
        for label, key in (("start ms (median)", "start_ms"), ("peak RSS MiB (median)", "peak_mib"))}})
    print_table(f"The runner's start and own peak, {args.rounds} alternating rounds", rows)
    write_report("runner_json", rows, [], notes, raw=samples)


if __name__ == "__main__":
    main()
