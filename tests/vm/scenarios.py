"""The local-backend scenarios of the cgroup v2 tests, run in one process through the CLI's main():
under software emulation an interpreter start-up with the harness's imports takes long, so each user pays
it once. Usage (as the user, inside the scope under test): python tests/vm/scenarios.py MODEL OUT.json [--doctor-only]
Writes {scenario: [stored runs]}, the doctor's checks, and the cgroup this process ends up in."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

from harness.cli import main
from harness.commands.doctor import checks
from harness.core.config import load_profile
from harness.store.results import list_sessions, load_runs

WORKLOADS = Path(__file__).resolve().parents[1] / "workloads"
SPIKE_MIB, SPIKE_MS = 300, 30
SCENARIOS = {  # name: (script, harness flags, script arguments); one run each, since every start-up is slow, but two
    # where the second run's runner, started ahead during the first one's teardown, must get the same limits
    "baseline": ("spike.py", ("--sample-interval-ms", "1000"), ("0", str(SPIKE_MS))),
    "spike": ("spike.py", ("--sample-interval-ms", "1000"), (str(SPIKE_MIB), str(SPIKE_MS))),
    "oom": ("alloc.py", ("--memory", "150m", "--repeats", "2"), ("400",)),
    "limits": ("cgroup_limits.py", ("--cpus", "0.5", "--memory", "256m", "--repeats", "2"), ("1.0",)),
}


def profile(model: str, results: Path, script: str, flags: tuple[str, ...], args: tuple[str, ...]) -> list[dict]:
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["profile", "--json", "--results-dir", str(results), model, "--backend", "local",
                     "--repeats", "1", "--script", str(WORKLOADS / script), *flags, "--", *args])
    if code:
        raise SystemExit(f"harness profile --script {script} exited with {code}")
    return [run.line for run in load_runs(list_sessions(results)[-1])]  # each run as stored, for JSON


def run(model: str, out: Path, doctor_only: bool) -> None:
    found: dict = {"doctor": [list(row) for row in checks(load_profile(None).image)]}
    for name, (script, flags, args) in ({} if doctor_only else SCENARIOS).items():
        found[name] = profile(model, out.parent / f"results-{name}", script, flags, args)
    found["own_cgroup"] = Path("/proc/self/cgroup").read_text().split("::", 1)[1].strip()
    out.write_text(json.dumps(found))


if __name__ == "__main__":
    run(sys.argv[1], Path(sys.argv[2]), "--doctor-only" in sys.argv[3:])
