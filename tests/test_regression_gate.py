"""`harness check`, the regression gate, on sessions written through the real store with numbers chosen here: the
one-sided test's boundary at 3 + 3 repeats, Holm over the models, the thresholds, failed runs, bad input and the
JUnit XML. tests/test_regression_gate_profiled.py runs it on profiled sessions."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from scipy import stats

from harness.cli import main
from harness.store.results import SessionStore
from tests.analysis_fixtures import write_session

BASELINE, SESSION = "20250101-000000000-base", "20250102-000000000-head"


def sessions(results: Path, baseline: dict[str, list[float]], head: dict[str, list[float]],
             memory: tuple[dict[str, list[float]], dict[str, list[float]]] | None = None) -> None:
    write_session(results, baseline, cpus=1.0, session_id=BASELINE, peak_memory=memory[0] if memory else None)
    write_session(results, head, cpus=1.0, session_id=SESSION, peak_memory=memory[1] if memory else None)


def check(capsys: pytest.CaptureFixture[str], results: Path, *argv: str) -> tuple[int, dict[str, Any], str]:
    capsys.readouterr()
    code = main(["check", "--baseline", BASELINE, "--results-dir", str(results), "--json", *argv])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out else {}, err


def verdicts(result: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(c["model"], c["check"]): c for c in result["checks"]}


def test_twice_as_slow_at_three_repeats_fails_the_gate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """3 + 3 repeats fully separated: the one-sided exact p is 1/C(6, 3) = 1/20, which reaches alpha = 0.05."""
    base, head = [2.0, 2.1, 2.05], [4.0, 4.2, 4.1]
    sessions(tmp_path, {"net": base}, {"net": head})
    code, result, _ = check(capsys, tmp_path)
    assert code == 1 and not result["passed"]
    latency = verdicts(result)["net", "latency_ms"]
    assert latency["verdict"] == "fail"
    assert latency["p_value"] == pytest.approx(1 / math.comb(6, 3))
    assert latency["p_value"] == pytest.approx(stats.mannwhitneyu(head, base, alternative="greater").pvalue)
    assert (latency["baseline"], latency["value"]) == (2.05, 4.1)
    assert latency["change"] == pytest.approx(4.1 / 2.05 - 1)
    assert "2.00× slower: median 2.05 → 4.1 ms (+100.0%), one-sided Mann–Whitney p = 0.05 ≤ 0.05" in latency["message"]
    assert verdicts(result)["net", "peak_memory_mib"]["verdict"] == "pass"  # 102.05 → 104.1 MiB: +2%


def test_an_unchanged_model_at_three_repeats_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, head = [2.0, 2.1, 2.05], [2.08, 2.02, 2.12]
    sessions(tmp_path, {"net": base}, {"net": head})
    code, result, err = check(capsys, tmp_path)
    assert code == 0 and result["passed"] and err == ""
    latency = verdicts(result)["net", "latency_ms"]
    assert latency["verdict"] == "pass"
    assert latency["p_value"] == pytest.approx(stats.mannwhitneyu(head, base, alternative="greater").pvalue)
    assert latency["p_value"] > 0.05 and "within --max-slowdown 10%" in latency["message"]


def test_a_slower_model_the_test_cannot_call_slower_passes_and_says_what_would(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No false alarm where the test cannot reach alpha: overlapping runs at 3 + 3, and 2 + 2 runs at all."""
    sessions(tmp_path, {"net": [2.0, 2.1, 3.5], "pair": [2.0, 2.1]}, {"net": [3.0, 3.2, 3.4], "pair": [4.0, 4.1]})
    code, result, err = check(capsys, tmp_path)
    assert code == 0
    overlapping = verdicts(result)["net", "latency_ms"]
    assert overlapping["verdict"] == "pass" and overlapping["p_value"] == pytest.approx(
        stats.mannwhitneyu([3.0, 3.2, 3.4], [2.0, 2.1, 3.5], alternative="greater").pvalue)
    assert "not shown slower" in overlapping["message"] and overlapping["repeats_needed"] >= 4
    pair = verdicts(result)["pair", "latency_ms"]
    assert pair["verdict"] == "pass" and pair["p_value"] is None
    assert ("with 2 + 2 repeats the one-sided test cannot reach p ≤ 0.05 (its smallest p is 0.17), so no slowdown can "
            "fail this check; 4 repeats per model can") in pair["message"]  # alpha / 2 for the two models compared


def test_holm_over_the_models_keeps_a_gate_of_many_at_alpha(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three models at 3 repeats each: 1/20 times 3 does not reach 0.05, so the gate cannot fail and says so, with
    the repeats that can (1/70 at 4 + 4 is under 0.05 / 3). With 4 repeats each the slow model fails."""
    base = {"slow": [2.0, 2.1, 2.05], "same": [3.0, 3.1, 3.05], "also": [1.0, 1.02, 1.01]}
    head = {"slow": [4.0, 4.2, 4.1], "same": [3.08, 3.02, 3.12], "also": [1.01, 1.0, 1.02]}
    sessions(tmp_path / "three", base, head)
    code, result, err = check(capsys, tmp_path / "three")
    assert code == 0
    slow = verdicts(result)["slow", "latency_ms"]
    assert slow["p_adjusted"] == pytest.approx(3 / 20) and "Holm-adjusted over 3 models 0.15 > 0.05" in slow["message"]
    assert "no slowdown of the 3 models compared can fail the gate" in err and "REPEATS=4" in " ".join(err.split())
    base4 = {name: values + [values[0]] for name, values in base.items()}
    head4 = {name: values + [values[1]] for name, values in head.items()}
    sessions(tmp_path / "four", base4, head4)
    code, result, err = check(capsys, tmp_path / "four")
    assert code == 1 and [c["model"] for c in result["checks"] if c["verdict"] == "fail"] == ["slow"]
    assert verdicts(result)["slow", "latency_ms"]["p_adjusted"] == pytest.approx(3 / math.comb(8, 4))
    assert err == ""


@pytest.mark.parametrize(("max_slowdown", "head", "code", "reason"), [
    ("5%", [2.16, 2.17, 2.18], 0, "over --max-slowdown 5% but under the 10% minimum factor"),
    ("0.05", [2.30, 2.32, 2.31], 1, "1.13× slower"),
    ("20%", [2.30, 2.32, 2.31], 0, "within --max-slowdown 20%"),
])
def test_thresholds_and_the_minimum_factor(tmp_path: Path, capsys: pytest.CaptureFixture[str], max_slowdown: str,
                                           head: list[float], code: int, reason: str) -> None:
    sessions(tmp_path, {"net": [2.0, 2.05, 2.04]}, {"net": head})
    got, result, err = check(capsys, tmp_path, "--max-slowdown", max_slowdown)
    assert got == code and reason in verdicts(result)["net", "latency_ms"]["message"]
    assert ("under the 10% minimum factor" in err) == (max_slowdown in ("5%", "0.05"))


def test_peak_memory_growth_beyond_its_threshold_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    latencies = {"net": [2.0, 2.1, 2.05], "lean": [1.0, 1.1, 1.05]}
    sessions(tmp_path, latencies, latencies,
             ({"net": [100.0, 101.0, 100.5], "lean": [50.0, 50.5, 51.0]},
              {"net": [108.0, 107.0, 107.5], "lean": [51.0, 51.5, 52.0]}))
    code, result, _ = check(capsys, tmp_path, "--max-memory-growth", "5%")
    assert code == 1
    grown = verdicts(result)["net", "peak_memory_mib"]
    assert grown["verdict"] == "fail" and grown["change"] == pytest.approx(107.5 / 100.5 - 1)
    assert grown["message"] == "peak memory median 100.5 → 107.5 MiB (+7.0%), over --max-memory-growth 5%"
    assert verdicts(result)["lean", "peak_memory_mib"]["verdict"] == "pass"  # +2%
    assert check(capsys, tmp_path, "--max-memory-growth", "10%")[0] == 0


def test_failed_runs_fail_the_gate_and_new_and_missing_models_are_named(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    sessions(tmp_path, {"net": [2.0, 2.1, 2.05], "gone": [1.0, 1.0, 1.0]}, {"net": [2.0, 2.1], "fresh": [5.0] * 3})
    store = SessionStore(tmp_path, SESSION)
    store.append_run({"session_id": SESSION, "run_id": "net-oom", "model_name": "net", "cpus": 1.0, "status": "oom"})
    code, result, _ = check(capsys, tmp_path)
    assert code == 1
    checks = verdicts(result)
    assert checks["net", "runs"]["verdict"] == "fail"
    assert checks["net", "runs"]["message"].startswith("1 of 3 runs failed (oom=1) (none in the baseline)")
    assert checks["net", "latency_ms"]["verdict"] == "skip"  # its ok runs, its lightest, would flatter it
    assert checks["fresh", "baseline"]["verdict"] == "skip" and result["missing"] == ["gone (cpus=1)"]


@pytest.mark.parametrize(("argv", "needle"), [
    (["--baseline", "20990101-nothing"], "--baseline 20990101-nothing: no session 20990101-nothing under"),
    (["--baseline", BASELINE, "--max-slowdown", "5"], "--max-slowdown 5: a bare number from 1 up is ambiguous; "
                                                      "write --max-slowdown 5%"),
    (["--baseline", BASELINE, "--max-memory-growth", "lots"], "--max-memory-growth lots: not a percentage"),
    (["--baseline", BASELINE, "--max-slowdown=-3%"], "--max-slowdown -3%: give a growth of 0 or more"),
    (["--baseline", BASELINE, "--metric", "peak_memory_mib"], "unknown metric 'peak_memory_mib'; choose one of"),
    (["--baseline", SESSION], f"--baseline {SESSION} is the session being checked"),
    (["--baseline", BASELINE, "--session", "all"], "--session all: the gate checks one session"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                          needle: str) -> None:
    sessions(tmp_path, {"net": [2.0, 2.1, 2.05]}, {"net": [2.0, 2.1, 2.05]})
    capsys.readouterr()
    code = main(["check", "--results-dir", str(tmp_path), *argv])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1 and needle in err, err


def test_a_baseline_under_other_conditions_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for session_id, memory_bytes in ((BASELINE, 512 * 2**20), (SESSION, 1024 * 2**20)):
        store = SessionStore(tmp_path, session_id)
        store.write_session({"session_id": session_id, "models": ["net"]})
        for repeat in range(3):
            store.append_run({"session_id": session_id, "run_id": f"net-{repeat}", "model_name": "net", "cpus": 1.0,
                              "status": "ok", "latency_stats_ms": {"headline": 2.0 + repeat / 10},
                              "conditions": {"cpus": 1.0, "memory_bytes": memory_bytes}})
    code = main(["check", "--baseline", BASELINE, "--results-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "model net at cpus=1 was measured under other conditions in the baseline" in err and "MEMORY 512 MiB" in err


def test_junit_xml_has_a_testcase_per_model_and_check_and_the_failures(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    sessions(tmp_path, {"net": [2.0, 2.1, 2.05], "ok": [1.0, 1.1, 1.05]},
             {"net": [4.0, 4.2, 4.1], "ok": [1.05, 1.0, 1.1], "new": [3.0] * 3})
    report = tmp_path / "ci" / "report.xml"
    report.parent.mkdir()
    code, result, _ = check(capsys, tmp_path, "--junit", str(report))
    suites = ET.parse(report).getroot()
    assert suites.tag == "testsuites"
    (suite,) = suites.findall("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == len(result["checks"]) == int(suite.get("tests")) == 7
    assert {(c.get("classname"), c.get("name")) for c in cases} == {
        (f"harness.check.{c['model']}", f"{c['check']} cpus=1") for c in result["checks"]}
    failures = [(case.get("classname"), case.find("failure")) for case in cases if case.find("failure") is not None]
    # Holm over two models: 2 × 1/20 = 0.1, so the doubled latency does not fail at 3 repeats; the memory does not
    # grow 5% (102.05 → 104.1 MiB): the gate passes, and says why in the slowdown's testcase.
    assert code == 0 and failures == [] and int(suite.get("failures")) == 0
    skipped = [case for case in cases if case.find("skipped") is not None]
    assert [case.get("classname") for case in skipped] == ["harness.check.new"] and suite.get("skipped") == "1"
    slow = next(case for case in cases if case.get("classname") == "harness.check.net" and
                case.get("name") == "latency_ms cpus=1")
    assert "Holm-adjusted over 2 models 0.1 > 0.05" in slow.find("system-out").text
    code, result, _ = check(capsys, tmp_path, "--junit", str(report), "--max-memory-growth", "1%")
    failing = [case for case in ET.parse(report).getroot().iter("testcase") if case.find("failure") is not None]
    assert code == 1 and [(c.get("classname"), c.get("name")) for c in failing] == [
        ("harness.check.net", "peak_memory_mib cpus=1")]
    failure = failing[0].find("failure")
    assert failure.get("message") == verdicts(result)["net", "peak_memory_mib"]["message"]
    assert "over --max-memory-growth 1%" in failure.get("message")


def test_junit_target_is_checked_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sessions(tmp_path, {"net": [2.0, 2.1, 2.05]}, {"net": [4.0, 4.2, 4.1]})
    code = main(["check", "--baseline", BASELINE, "--results-dir", str(tmp_path), "--junit", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and f"--junit {tmp_path}: a directory; give a file path" in err


def test_the_baseline_may_be_a_results_directory_its_newest_session_the_baseline(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """CI keeps the main branch's results as an artifact: --baseline names that directory."""
    main_results, head_results = tmp_path / "main", tmp_path / "head"
    write_session(main_results, {"net": [9.0, 9.0, 9.0]}, cpus=1.0, session_id="20241231-000000000-old1")
    write_session(main_results, {"net": [2.0, 2.1, 2.05]}, cpus=1.0, session_id=BASELINE)
    write_session(head_results, {"net": [4.0, 4.2, 4.1]}, cpus=1.0, session_id=SESSION)
    capsys.readouterr()
    code = main(["check", "--baseline", str(main_results), "--results-dir", str(head_results), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 1 and result["baseline"] == BASELINE and result["session"] == SESSION
