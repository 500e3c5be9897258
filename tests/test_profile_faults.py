"""Bad input and faults: one clear line, status recorded, nothing lost, nothing left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness.cli import main
from harness.measure.cgroups import discover
from harness.store.results import list_sessions, load_runs, load_session_info
from tests.helpers import INTERRUPTED_EXITS, ctrl_c_handled, profile_json, session_runs

HARNESS = [sys.executable, "-m", "harness.cli"]


def leftover_run_cgroups(results: Path) -> list[Path]:
    """Run cgroups of the sessions under `results` that still exist (other sessions may run meanwhile)."""
    own = discover()
    return [p for s in list_sessions(results) for d in set(own.dirs.values()) for p in d.glob(f"harness-{s.name}-*")]


def one_error_line(capsys, *argv: str) -> str:
    capsys.readouterr()
    code = main(list(argv))
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_missing_corrupt_and_unknown_models(capsys, in_tmp_cwd: Path) -> None:
    assert "not found" in one_error_line(capsys, "profile", "nope.onnx", "--backend", "local")
    (in_tmp_cwd / "broken.onnx").write_bytes(b"\x08\x07garbage that is not protobuf" * 10)
    assert "not a readable ONNX model" in one_error_line(capsys, "profile", "broken.onnx", "--backend", "local")
    (in_tmp_cwd / "model.caffemodel").write_bytes(b"x")
    assert "unknown extension '.caffemodel'" in one_error_line(capsys, "profile", "model.caffemodel",
                                                               "--backend", "local")
    assert "REPEATS='zero'" in one_error_line(capsys, "profile", "nope.onnx", "--repeats", "zero")
    assert not list_sessions(in_tmp_cwd / "results")  # nothing was started


def test_crash_is_an_error_run_with_exit_code_and_stderr(capsys, in_tmp_cwd: Path, tiny_onnx: Path,
                                                         workloads: Path) -> None:
    results = in_tmp_cwd / "results"
    summary = profile_json(capsys, results, str(tiny_onnx), "--backend", "local", "--repeats", "2",
                           "--script", str(workloads / "crash.py"))
    runs = session_runs(results)
    assert [(r["status"], r["exit_code"]) for r in runs] == [("error", 3), ("error", 3)]
    assert "loading model failed" in runs[0]["stderr_tail"]
    assert summary["models"][0]["statuses"] == {"error": 2}


def test_timeout_kills_the_whole_tree(capsys, in_tmp_cwd: Path, tiny_onnx: Path, workloads: Path) -> None:
    results = in_tmp_cwd / "results"
    started = time.monotonic()
    profile_json(capsys, results, str(tiny_onnx), "--backend", "local", "--repeats", "1", "--timeout", "1",
                 "--script", str(workloads / "sleep.py"), "--", "30")
    assert time.monotonic() - started < 10
    run = session_runs(results)[0]
    assert run["status"] == "timeout" and 1.0 <= run["runtime_s"] < 2.0
    sleepers = [p for p in psutil.process_iter(["cmdline"]) if "time.sleep(600)" in " ".join(p.info["cmdline"] or [])]
    assert not sleepers
    assert not leftover_run_cgroups(results)


def test_user_script_arguments_and_custom_metrics(capsys, in_tmp_cwd: Path, tiny_onnx: Path) -> None:
    script = in_tmp_cwd / "mine.py"
    script.write_text("import sys\nfrom harness.measure.report_protocol import report\n"
                      "report(args=' '.join(sys.argv[1:]), score=0.5)\n")
    results = in_tmp_cwd / "results"
    profile_json(capsys, results, str(tiny_onnx), "--backend", "local", "--repeats", "1", "--script", str(script),
                 "--", "--flag", "a b; echo no-shell")
    run = session_runs(results)[0]
    assert run["status"] == "ok" and run["latency_stats_ms"] is None and run["peak_memory_mib"] > 0
    assert run["metrics"] == {"args": f"{tiny_onnx} --flag a b; echo no-shell", "score": 0.5}


def test_ctrl_c_keeps_completed_runs_cleans_up_and_resumes(in_tmp_cwd: Path, tiny_onnx: Path,
                                                           workloads: Path) -> None:
    results = in_tmp_cwd / "results"
    argv = [*HARNESS, "profile", str(tiny_onnx), "--backend", "local", "--repeats", "4", "--results-dir",
            str(results), "--script", str(workloads / "alloc.py"), "--", "10", "1.0"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
                               preexec_fn=ctrl_c_handled)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        sessions = list_sessions(results)
        if sessions and len(load_runs(sessions[0])) >= 1:
            break
        time.sleep(0.05)
    time.sleep(0.3)  # the second run is now in flight
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode in INTERRUPTED_EXITS, err
    assert "Traceback" not in err and "completed runs are kept" in err
    session = list_sessions(results)[0]
    kept = load_runs(session)
    assert 1 <= len(kept) < 4 and all(r["status"] == "ok" for r in kept)
    assert load_session_info(session)["state"] == "interrupted"
    assert not leftover_run_cgroups(results)
    resumed = subprocess.run([*HARNESS, "profile", "--resume", session.name, "--results-dir", str(results),
                              "--json"], capture_output=True, text=True, env=env, timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["models"][0]["n_runs"] == 4
    runs = load_runs(session)
    assert sorted(r["run_id"] for r in runs) == sorted({r["run_id"] for r in runs})
    assert load_session_info(session)["state"] == "complete"


@pytest.mark.parametrize("flag", ["--json"])
def test_json_stdout_is_only_json(in_tmp_cwd: Path, tiny_onnx: Path, flag: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run([*HARNESS, "profile", str(tiny_onnx), "--backend", "local", "--repeats", "2",
                           "--iterations", "50", flag], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["backend"] == "local" and summary["models"][0]["n_ok"] == 2
    assert Path(summary["results_dir"], "summary.csv").exists()


def test_unusable_results_dir_is_one_line_naming_path_and_reason(capsys, in_tmp_cwd: Path, tiny_onnx: Path) -> None:
    blocker = in_tmp_cwd / "a-file"
    blocker.write_text("not a directory")
    err = one_error_line(capsys, "profile", str(tiny_onnx), "--backend", "local", "--results-dir", str(blocker))
    assert err == (f"harness: error: RESULTS_DIR (from --results-dir) {blocker} cannot be used: it exists and is not "
                   "a directory; pick a writable directory")
    below = blocker / "results"
    err = one_error_line(capsys, "profile", str(tiny_onnx), "--backend", "local", "--results-dir", str(below))
    assert f"{below} cannot be used: Not a directory" in err
    assert blocker.read_text() == "not a directory"


def test_unusable_report_dir_is_one_line(capsys, in_tmp_cwd: Path, tiny_onnx: Path) -> None:
    results = in_tmp_cwd / "results"
    profile_json(capsys, results, str(tiny_onnx), "--backend", "local", "--repeats", "1", "--iterations", "5")
    blocker = in_tmp_cwd / "a-file"
    blocker.write_text("")
    err = one_error_line(capsys, "report", "--results-dir", str(results), "--out", str(blocker))
    assert err.endswith(f"report directory (--out) {blocker} cannot be used: it exists and is not a directory; "
                        "pick a writable directory")
