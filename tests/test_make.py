"""Values given to `make` reach the harness, at their stated precedence, and never through a shell."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from harness.core.config import SET_PREFIX, VARIABLES
from harness.store.results import list_sessions, load_runs, load_session_info

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024**2
FAST = ("REPEATS=1", "ITERATIONS=5", "WARMUP=1", "BACKEND=local")


def make(target: str, *assignments: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """`make TARGET VAR=value...` in the checkout, with no HARNESS_SET_* inherited from the caller."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(SET_PREFIX) and k not in VARIABLES}
    return subprocess.run(["make", "-s", "-C", str(cwd), "-o", ".venv/.installed", "-o", ".venv/.installed-zoo",
                           target, *assignments], capture_output=True, text=True, timeout=900, env=env, check=False)


def test_make_profile_applies_cpus_and_memory_given_to_make(tmp_path: Path, tiny_onnx: Path) -> None:
    results = tmp_path / "results"
    marker = tmp_path / "pwned"
    done = make("profile", f"MODEL={tiny_onnx}", "CPUS=2", "MEMORY=512m", *FAST, f"RESULTS_DIR={results}",
                f"DEVICE_NAME=x; touch {marker}")
    assert done.returncode == 0, done.stderr
    (session,) = list_sessions(results)
    (run,) = load_runs(session)
    assert run["status"] == "ok", run["stderr_tail"]
    assert (run["cpus"], run["memory_mib"], run["device_name"]) == (2.0, 512.0, f"x; touch {marker}")
    assert not marker.exists()  # the value was data, not a command
    assert run["limits_requested"]["memory_bytes"] == 512 * MIB and run["limits_requested"]["cpus"] == 2.0
    if run["isolation"] != "rlimit":
        assert run["limits_applied"]["memory_bytes"] == 512 * MIB and run["limits_applied"]["cpus"] == 2.0
    info = load_session_info(session)
    assert info["profile"]["MEMORY"] == 512 * MIB and info["profile"]["CPUS"] == 2.0
    assert info["profile_sources"]["MEMORY"] == "make MEMORY=... (HARNESS_SET_MEMORY)"


def test_make_sweep_takes_the_profiles_cpus_unless_given_a_list(tmp_path: Path, tiny_onnx: Path) -> None:
    device = tmp_path / "device.env"
    device.write_text("CPUS=2\nMEMORY=1g\n")
    for name, extra, cpus in (("profile-cpus", (), [2.0]), ("list", ("CPUS=1,2",), [1.0, 2.0])):
        results = tmp_path / name
        done = make("sweep", f"MODEL={tiny_onnx}", f"ENV={device}", "MEMORY=300m", *FAST, *extra,
                    f"RESULTS_DIR={results}")
        assert done.returncode == 0, done.stderr
        (session,) = list_sessions(results)
        runs = load_runs(session)
        assert sorted(run["cpus"] for run in runs) == cpus
        assert {run["memory_mib"] for run in runs} == {300.0}  # make's MEMORY beats the ENV file's


def test_a_bad_value_given_to_make_is_refused_with_one_line(tmp_path: Path, tiny_onnx: Path) -> None:
    done = make("profile", f"MODEL={tiny_onnx}", "MEMORY=lots", f"RESULTS_DIR={tmp_path}")
    assert done.returncode != 0
    assert "harness: error: MEMORY='lots' (from make MEMORY=... (HARNESS_SET_MEMORY)) is not valid" in done.stderr
    assert "Traceback" not in done.stderr


def test_make_profile_passes_dims(tmp_path: Path) -> None:
    """`make profile DIMS="seq=12"` sizes a dynamic sequence (HARNESS_SET_DIMS); without it make stops in one line."""
    from tests.token_models import make_encoder

    model = make_encoder(tmp_path / "encoder.onnx")
    results = tmp_path / "results"
    refused = make("profile", f"MODEL={model}", *FAST, f"RESULTS_DIR={results}")
    assert refused.returncode != 0 and 'set DIMS="seq=N"' in refused.stderr and not results.exists()
    done = make("profile", f"MODEL={model}", "DIMS=seq=12 unused=3", *FAST, f"RESULTS_DIR={results}")
    assert done.returncode == 0, done.stderr
    (session,) = list_sessions(results)
    (run,) = load_runs(session)
    assert run["status"] == "ok" and run["conditions"]["dims"] == "seq=12", run["stderr_tail"]
    info = load_session_info(session)
    assert info["profile"]["DIMS"] == "seq=12 unused=3" and any("DIMS sets unused" in n for n in info["notes"])


def test_setup_zoo_says_its_size_before_it_installs() -> None:
    """No CPU-only torch of the zoo's pair is on the index: the multi-GB download is announced, with its size, before
    pip runs (a dry run of the recipe, nothing installed)."""
    done = subprocess.run(["make", "-n", "-B", "-C", str(ROOT), "setup-zoo"], capture_output=True, text=True,
                          check=True)
    lines = done.stdout.splitlines()
    said = next(i for i, line in enumerate(lines) if line.startswith('echo "setup-zoo: installing'))
    installed = next(i for i, line in enumerate(lines) if '.[dev,zoo]"' in line)
    assert said < installed and "about 5.5 GB" in lines[said] and "no CPU-only build" in lines[said]


def test_make_profile_takes_a_target(tmp_path: Path, tiny_onnx: Path) -> None:
    """TARGET given to make reaches the harness as data: a board that does not answer is one line naming it, and a
    value with shell characters is refused before anything connects."""
    done = make("profile", f"MODEL={tiny_onnx}", "TARGET=ssh://nobody@127.0.0.1:9", f"RESULTS_DIR={tmp_path}")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "board ssh://nobody@127.0.0.1:9: it does not answer" in done.stderr
    marker = tmp_path / "pwned"
    done = make("profile", f"MODEL={tiny_onnx}", f"TARGET=ssh://$(touch {marker})", f"RESULTS_DIR={tmp_path}")
    assert done.returncode != 0 and "TARGET=" in done.stderr and "is not valid" in done.stderr
    assert not marker.exists()
