"""Sweeps: models x CPUS values x repeats in one interleaved session, capped at the host's cores, with a report."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

from harness.cli import main
from harness.store.results import list_sessions, load_runs, load_session_info
from tests.conftest import make_matmul_model


def test_sweep_interleaves_caps_and_reports(capsys, in_tmp_cwd: Path, tiny_onnx: Path) -> None:
    other = make_matmul_model(in_tmp_cwd / "wide_mlp.onnx", size=512, layers=3)
    results = in_tmp_cwd / "results"
    too_many = len(os.sched_getaffinity(0)) + 2
    capsys.readouterr()
    code = main(["sweep", str(tiny_onnx), str(other), "--cpus", f"1,{too_many}", "--repeats", "2",
                 "--iterations", "20", "--backend", "local", "--results-dir", str(results), "--json", "--seed", "7"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads(captured.out)
    allowed = float(len(os.sched_getaffinity(0)))
    assert sorted((e["model_name"], e["cpus"]) for e in summary["models"]) == sorted(
        (m, c) for m in ("tiny_mlp", "wide_mlp") for c in {1.0, allowed})
    session = list_sessions(results)[0]
    info = load_session_info(session)
    assert any(f"CPUS={too_many}" in note for note in info["notes"]) and info["seed"] == 7
    runs = load_runs(session)
    per_round = Counter(r["round"] for r in runs)
    assert all(count == len(summary["models"]) for count in per_round.values()) and len(per_round) == 2
    assert all(r["status"] == "ok" for r in runs)
    report = session / "report" / "report.html"
    assert report.exists() and "wide_mlp" in report.read_text()


def test_bad_cpus_list_is_one_line(capsys, in_tmp_cwd: Path, tiny_onnx: Path) -> None:
    capsys.readouterr()
    assert main(["sweep", str(tiny_onnx), "--cpus", "1,x", "--backend", "local"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "CPUS='x' (from --cpus" in err
