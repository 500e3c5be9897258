"""A full disk (ENOSPC) on a real tmpfs: one line naming the file and the space, nothing lost, nothing half-written,
no temp file left, and a session that resumes once space is freed."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.backends.local import LocalBackend
from harness.cli import main
from harness.core.errors import StorageError
from harness.core.storage import hold_space, write_bytes_atomically, write_through_held
from harness.store.results import (
    RESERVE_FILE,
    SESSION_FILE,
    SessionStore,
    list_sessions,
    load_runs,
    load_session_info,
)
from tests.analysis_fixtures import write_session
from tests.helpers import run_spec
from tests.test_calibrate_cli import FASTEST, HARNESS, write_device_csv

CLI = [sys.executable, "-m", "harness.cli"]
ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
FILLER = "filler"


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs of its own, unmounted at the end (root only; skipped elsewhere)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def fill(mount: Path, leave: int = 0) -> Path:
    """A file that takes all the free space of `mount` but `leave` bytes (grown again while a session running beside
    it takes some of that space first)."""
    path = mount / FILLER
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for _ in range(100):
            free = shutil.disk_usage(mount).free
            if free <= leave:
                break
            with contextlib.suppress(OSError):
                os.posix_fallocate(fd, os.fstat(fd).st_size, free - leave)
    finally:
        os.close(fd)
    assert shutil.disk_usage(mount).free <= leave
    return path


@contextlib.contextmanager
def kept_full(mount: Path) -> Iterator[None]:
    """`mount` filled, and filled again every few milliseconds until the block ends: space that a session frees (the
    folder of a run it has finished with) is taken again, as a disk that other writers fill would be."""
    stop = threading.Event()

    def refill() -> None:
        while not stop.wait(0.005):
            fill(mount)

    fill(mount)
    thread = threading.Thread(target=refill, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def temp_files(mount: Path) -> list[Path]:
    """Whatever a write left behind: temp files and folders, the session's held space."""
    return [path for path in mount.rglob("*") if ".tmp" in path.name or path.name == RESERVE_FILE]


def error_line(err: str) -> str:
    """The one error line of a run of the CLI, which printed no traceback."""
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("harness: error:")]
    assert len(lines) == 1, err
    return lines[0]


def whole_lines(session: Path) -> list[dict]:
    """Every line of runs.jsonl, each of which must be whole JSON (no torn last line skipped)."""
    return [json.loads(line) for line in (session / "runs.jsonl").read_text().splitlines()]


def wait_for_a_run(results: Path) -> None:
    """Until the first run of the session under `results` is on disk."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (list_sessions(results) and load_runs(list_sessions(results)[0])):
        time.sleep(0.02)


def test_a_session_that_fills_the_disk_stops_in_one_line_and_resumes(disk: Path, tiny_onnx: Path,
                                                                      workloads: Path) -> None:
    results = disk / "results"
    argv = [*CLI, "profile", str(tiny_onnx), "--backend", "local", "--repeats", "4", "--results-dir", str(results),
            "--script", str(workloads / "alloc.py"), "--", "10", "0.5"]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    wait_for_a_run(results)
    filler = fill(disk)  # the disk fills while the second run is measured
    _, err = process.communicate(timeout=60)
    line = error_line(err)
    assert process.returncode == StorageError.exit_code, err
    assert re.search(r"cannot write \S+: No space left on device \(needs [\d.]+ \w+, 0 B free on its disk\)", line)
    session = list_sessions(results)[0]
    kept = whole_lines(session)
    assert 1 <= len(kept) < 4 and f"{len(kept)} finished run{'s' * (len(kept) > 1)} kept in {session};" in line
    assert load_session_info(session)["state"] == "interrupted"
    assert not temp_files(disk)

    resume = re.search(r"continue with `([^`]+)`", line)
    assert resume, line
    command = shlex.split(resume.group(1))
    assert command[0] == "harness"
    filler.unlink()
    done = subprocess.run([*CLI, *command[1:]], capture_output=True, text=True, env=ENV, timeout=60)
    assert done.returncode == 0, done.stderr
    runs = whole_lines(session)
    assert len(runs) == 4 == len({run["run_id"] for run in runs}) and all(run["status"] == "ok" for run in runs)
    assert runs[:len(kept)] == kept
    assert load_session_info(session)["state"] == "complete"
    assert not temp_files(disk)


def test_a_write_through_held_space_asks_the_full_disk_for_nothing(disk: Path) -> None:
    """session.json's next state is written into the space held for it and renamed into place: a disk that filled
    after the space was held cannot refuse it (releasing the space first let the writer that filled it take it)."""
    target, held = disk / SESSION_FILE, disk / RESERVE_FILE
    hold_space(held, 64 * 1024)
    fill(disk)
    data = b'{"state": "interrupted"}\n'
    with pytest.raises(StorageError):  # a plain write needs a block the full disk has not
        write_bytes_atomically(disk / "other.json", data)
    write_through_held(target, data, held)
    assert target.read_bytes() == data and not held.exists()
    fill(disk)
    with pytest.raises(StorageError):  # nothing held any more, and the disk is full
        write_through_held(target, data * 4000, held)
    assert target.read_bytes() == data and not temp_files(disk)


def test_an_append_the_disk_refuses_is_cut_back_to_the_last_whole_line(disk: Path) -> None:
    store = SessionStore(disk / "results", "s")
    for number in range(2):
        store.append_run({"run_id": f"r{number}", "model_name": "m"})
    store.write_summary({"models": []}, [{"model": "m"}])
    before = store.runs_path.read_bytes()
    summary_before = (store.path / "summary.json").read_bytes()
    fill(disk, leave=8192)  # room for part of the next line only
    with pytest.raises(StorageError) as caught:
        store.append_run({"run_id": "r2", "model_name": "m", "latencies_ms": [1.0] * 20000})
    assert store.runs_path.read_bytes() == before
    assert [run["run_id"] for run in load_runs(store.path)] == ["r0", "r1"]
    assert re.fullmatch(rf"cannot write {store.runs_path}: No space left on device \(needs [\d.]+ KiB, [\d.]+ \w+ "
                        r"free on its disk\); free space there and run again", str(caught.value))
    with pytest.raises(StorageError):  # a whole file: the old one stays, no temp file beside it
        store.write_summary({"models": ["x" * 100000]}, [{"model": "m"}])
    assert (store.path / "summary.json").read_bytes() == summary_before
    assert not temp_files(disk)


def test_report_rank_and_regress_on_a_full_disk_still_answer(disk: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    results = disk / "results"
    write_session(results, HARNESS, cpus=2.0)
    rows = [f"{model}_quant,4,{0.37 * value + 0.05!r},x" for model, value in FASTEST.items()]
    assert main(["import-device", str(write_device_csv(tmp_path / "dev.csv", rows)), "--device", "phone",
                 "--results-dir", str(results)]) == 0
    fill(disk)
    capsys.readouterr()

    assert main(["rank", "--results-dir", str(results)]) == 0
    out, err = capsys.readouterr()
    assert "latency_ms ranking" in out and all(model in out for model in HARNESS) and "Traceback" not in err
    assert main(["regress", "--device", "phone", "--results-dir", str(results)]) == 0
    out, err = capsys.readouterr()
    assert "chosen fit" in out and "Traceback" not in err

    assert main(["report", "--results-dir", str(results)]) == StorageError.exit_code
    out, err = capsys.readouterr()
    assert out.startswith("# Profiling report") and "## Answer" in out and all(model in out for model in HARNESS)
    assert "figures/" not in out and "tables/" not in out  # none of them was written
    report_dir = list_sessions(results)[0] / "report"
    line = error_line(err)
    assert re.search(rf"(\d+) of \1 report files not written in {report_dir} \(report\.md, report\.html, \d+ tables "
                     r"and figures\); free space there and run `harness report` again", line), line
    assert not (report_dir / "report.html").exists()
    assert not temp_files(disk)


def test_a_device_import_onto_a_full_disk_leaves_no_device_folder_and_keeps_an_earlier_one(
        disk: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = disk / "results"
    rows = [f"{model}_quant,4,{0.37 * value + 0.05!r},x" for model, value in FASTEST.items()]
    csv = write_device_csv(tmp_path / "dev.csv", rows * 40)  # repeats: a few KiB of repeats.csv
    filler = fill(disk)
    capsys.readouterr()
    argv = ["import-device", str(csv), "--device", "phone", "--results-dir", str(results)]
    assert main(argv) == StorageError.exit_code
    assert "No space left on device" in error_line(capsys.readouterr().err)
    assert not (results / "devices" / "phone").exists() and not temp_files(disk)

    filler.unlink()
    assert main(argv) == 0
    before = {path.name: path.read_bytes() for path in (results / "devices" / "phone").iterdir()}
    fill(disk)
    write_device_csv(csv, [row.replace(",x", ",y") for row in rows] * 40)  # new content: a new folder is written
    capsys.readouterr()
    assert main(argv) == StorageError.exit_code
    assert "No space left on device" in error_line(capsys.readouterr().err)
    assert {path.name: path.read_bytes() for path in (results / "devices" / "phone").iterdir()} == before
    assert not temp_files(disk)


def test_the_runners_spec_file_on_a_full_temp_disk_is_one_storage_error(
        disk: Path, tiny_onnx: Path, workloads: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's first runner (no runner started ahead) gets its spec through a file in the temp folder."""
    monkeypatch.setattr(tempfile, "tempdir", str(disk))  # what TMPDIR sets, for this process only
    fill(disk)
    backend = LocalBackend()
    try:
        with pytest.raises(StorageError) as caught:
            backend.run(run_spec(workloads / "alloc.py", "1", model=tiny_onnx))
    finally:
        backend.close()
    assert re.fullmatch(rf"cannot write {disk}/harness-local-\w+/spec\.json: No space left on device \(needs \d+ B, "
                        r"0 B free on its disk\); free space there and run again", str(caught.value))
    assert [path.name for path in disk.iterdir()] == [FILLER]


def test_a_temp_disk_that_fills_mid_session_stops_it_in_one_line_not_an_error_run(
        disk: Path, tmp_path: Path, tiny_onnx: Path, workloads: Path) -> None:
    """The runner's result file: a run measured but not handed back is not kept as an `error` run."""
    results = tmp_path / "results"
    argv = [*CLI, "profile", str(tiny_onnx), "--backend", "local", "--repeats", "4", "--results-dir", str(results),
            "--script", str(workloads / "alloc.py"), "--", "10", "0.5"]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**ENV, "TMPDIR": str(disk)})
    wait_for_a_run(results)
    with kept_full(disk):
        _, err = process.communicate(timeout=60)
    line = error_line(err)
    assert process.returncode == StorageError.exit_code, err
    assert re.search(rf"cannot write {disk}/harness-local-\w+/result\.json: the disk refused the run's result \(full "
                     r"or failing\) \(0 B free on its disk\); \d finished runs? kept in .*; once space is freed, "
                     r"continue with `harness profile --resume ", line), line
    session = list_sessions(results)[0]
    assert all(run["status"] == "ok" for run in whole_lines(session))
    assert load_session_info(session)["state"] == "interrupted"
    assert [path.name for path in disk.iterdir()] == [FILLER]


def test_a_zoo_export_onto_a_full_disk_leaves_no_half_model(disk: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The zoo cache and `zoo export --out`, each on the full disk (a NAS-Bench-201 network: no torch needed)."""
    monkeypatch.setenv("HARNESS_ZOO_DIR", str(disk / "zoo"))
    filler = fill(disk)
    capsys.readouterr()
    assert main(["zoo", "export", "nb201_0"]) == StorageError.exit_code
    assert re.search(rf"cannot write {disk}/zoo/nb201_0-\w+\.onnx: No space left on device \(0 B free on its disk\)",
                     error_line(capsys.readouterr().err))
    assert not list((disk / "zoo").iterdir())

    filler.unlink()
    monkeypatch.setenv("HARNESS_ZOO_DIR", str(tmp_path / "zoo"))
    fill(disk)
    assert main(["zoo", "export", "nb201_0", "--out", str(disk / "models")]) == StorageError.exit_code
    assert f"cannot write {disk}/models/nb201_0.onnx: No space left" in error_line(capsys.readouterr().err)
    assert list((tmp_path / "zoo").glob("nb201_0-*.onnx")) and not list((disk / "models").iterdir())


def test_a_storage_error_crosses_from_a_cluster_worker_whole() -> None:
    """Dask hands a worker's exception back pickled: the driver prints the same line."""
    err = StorageError(Path("/w/result.json"), "No space left on device", 2048, 0).with_fix("free space")
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is StorageError and str(again) == str(err) == (
        "cannot write /w/result.json: No space left on device (needs 2 KiB, 0 B free on its disk); free space")


def test_a_resume_writes_the_chrome_trace_a_full_disk_refused(tmp_path: Path, tiny_onnx: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A full disk met on a model's trace, the write after its last run was kept, leaves every run on disk and no
    trace; the resume then has no run to do, and writes the trace."""
    results = tmp_path / "results"
    assert main(["profile", str(tiny_onnx), "--backend", "local", "--repeats", "2", "--iterations", "5", "--per-op",
                 "--results-dir", str(results), "--json"]) == 0
    session = list_sessions(results)[0]
    (trace,) = (session / "traces").iterdir()
    written = json.loads(trace.read_text())
    trace.unlink()
    assert main(["profile", "--resume", session.name, "--results-dir", str(results), "--json"]) == 0
    assert json.loads(trace.read_text()) == written and len(whole_lines(session)) == 2
