"""regress / predict end to end: sessions in the real store, a device CSV on disk, the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.store import SCHEMA_VERSION
from tests.analysis_fixtures import write_session

HARNESS = {"net_a": [1.0, 1.2, 1.1], "net_b": [2.0, 2.1, 2.2], "net_c": [4.0, 4.4, 4.2], "net_d": [7.0, 7.2, 7.1],
           "net_e": [9.0, 9.3, 9.1]}
MEDIANS = {"net_a": 1.1, "net_b": 2.1, "net_c": 4.2, "net_d": 7.1, "net_e": 9.1}


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write_device_csv(path: Path, rows: list[str], header: str = "model,threads,latency_ms,family") -> Path:
    path.write_text("# test device\n" + header + "\n" + "\n".join(rows) + "\n")
    return path


def test_regress_recovers_an_exact_law_from_store_and_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    write_session(results, HARNESS, cpus=2.0)
    rows = [f"{model}_quant,4,{0.37 * value + 0.05!r},x" for model, value in MEDIANS.items()]
    csv = write_device_csv(tmp_path / "dev.csv", rows)
    assert run_cli(capsys, "import-device", str(csv), "--device", "phone", "--results-dir", str(results))[0] == 0
    code, out, err = run_cli(capsys, "regress", "--device", "phone", "--results-dir", str(results), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["schema_version"] == SCHEMA_VERSION and result["device"] == "phone"
    (calibration,) = result["calibrations"]
    assert calibration["group"] == {"cpus": 2.0}
    assert calibration["ols"]["slope"] == pytest.approx(0.37, abs=1e-9)
    assert calibration["ols"]["intercept"] == pytest.approx(0.05, abs=1e-9)
    assert calibration["stats"]["loo_rmse"] < 1e-9
    assert {p["harness_model"] for p in calibration["points"]} == set(MEDIANS)
    assert {p["harness"] for p in calibration["points"]} == set(MEDIANS.values())


def test_each_cpu_count_pairs_with_its_thread_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    session = write_session(results, HARNESS, cpus=1.0).name
    write_session(results, {m: [v / 2 for v in values] for m, values in HARNESS.items()}, cpus=2.0, session_id=session)
    rows = [f"{m},{threads},{slope * (MEDIANS[m] / threads)!r},x"
            for m in MEDIANS for threads, slope in ((1, 3.0), (2, 5.0))]
    run_cli(capsys, "import-device", str(write_device_csv(tmp_path / "d.csv", rows)), "--device", "d",
            "--results-dir", str(results))
    code, out, err = run_cli(capsys, "regress", "--device", "d", "--results-dir", str(results), "--json")
    assert code == 0, err
    slopes = {c["group"]["cpus"]: c["ols"]["slope"] for c in json.loads(out)["calibrations"]}
    assert slopes == pytest.approx({1.0: 3.0, 2.0: 5.0}, abs=1e-9)


def test_group_by_a_tag_fits_each_family(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    extra = {"net_f": [3.0, 3.0, 3.0], "net_g": [5.0, 5.1, 5.2], "net_h": [6.0, 6.0, 6.0]}
    write_session(results, {**HARNESS, **extra})
    medians = {**MEDIANS, "net_f": 3.0, "net_g": 5.1, "net_h": 6.0}
    rows = [f"{m},2,{(2.0 if m in extra else 1.0) * v!r},{'fam_b' if m in extra else 'fam_a'}"
            for m, v in medians.items()]
    run_cli(capsys, "import-device", str(write_device_csv(tmp_path / "d.csv", rows)), "--device", "d",
            "--results-dir", str(results))
    code, out, err = run_cli(capsys, "regress", "--device", "d", "--results-dir", str(results), "--json",
                             "--group-by", "family")
    assert code == 0, err
    slopes = {c["group"]["family"]: c["ols"]["slope"] for c in json.loads(out)["calibrations"]}
    assert slopes == pytest.approx({"fam_a": 1.0, "fam_b": 2.0}, abs=1e-9)
    code, _, err = run_cli(capsys, "regress", "--device", "d", "--results-dir", str(results), "--group-by", "os")
    assert code == 2 and err.count("\n") == 1 and "--group-by os" in err and "family" in err


def test_fewer_than_three_matched_models_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    write_session(results, HARNESS)
    rows = ["net_a,2,1.0,x", "net_b,2,2.0,x", "unknown_net,2,3.0,x"]
    run_cli(capsys, "import-device", str(write_device_csv(tmp_path / "d.csv", rows)), "--device", "d",
            "--results-dir", str(results))
    code, out, err = run_cli(capsys, "regress", "--device", "d", "--results-dir", str(results))
    assert code == 2 and out == ""
    error_lines = [line for line in err.splitlines() if line.startswith("harness: error:")]
    assert len(error_lines) == 1 and "at least 3" in error_lines[0] and "2 matched models" in error_lines[0]
    assert "Traceback" not in err


def test_predict_gives_intervals_and_warns_out_of_range(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    write_session(results, {**HARNESS, "big_net": [20.0, 20.5, 21.0], "mid_net": [5.0, 5.0, 5.0]})
    rows = [f"{m},2,{2.0 * v + 1.0 + (0.1 if i % 2 else -0.1)!r},x" for i, (m, v) in enumerate(MEDIANS.items())]
    run_cli(capsys, "import-device", str(write_device_csv(tmp_path / "d.csv", rows)), "--device", "d",
            "--results-dir", str(results))
    code, out, err = run_cli(capsys, "predict", "--device", "d", "--results-dir", str(results), "--json",
                             "big_net", "mid_net")
    assert code == 0, err
    predictions = {p["model"]: p for p in json.loads(out)["predictions"]}
    assert predictions["big_net"]["out_of_range"] and not predictions["mid_net"]["out_of_range"]
    assert "big_net" in err and "outside the calibrated range" in err and "mid_net" not in err
    for model, harness in (("big_net", 20.5), ("mid_net", 5.0)):
        p = predictions[model]
        assert p["harness"] == harness
        assert p["pi_low"] < p["predicted"] < p["pi_high"]
        assert p["predicted"] == pytest.approx(2.0 * harness + 1.0, rel=0.02)
    # Farther from the data, the interval widens.
    width = {m: p["pi_high"] - p["pi_low"] for m, p in predictions.items()}
    assert width["big_net"] > width["mid_net"]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["predict", "--device", "d", "not_profiled"], "no runs of not_profiled"),
        (["regress", "--device", "nodevice"], "run `harness import-device CSV --device nodevice`"),
        (["regress", "--device", "d", "--metric", "bogus_ms"], "unknown metric 'bogus_ms'"),
        (["regress", "--device", "d", "--metric", "runtime_s"], "has no runtime_s column"),
    ],
)
def test_bad_requests_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                   needle: str) -> None:
    results = tmp_path / "results"
    write_session(results, HARNESS)
    rows = [f"{m},2,{v},x" for m, v in MEDIANS.items()]
    run_cli(capsys, "import-device", str(write_device_csv(tmp_path / "d.csv", rows)), "--device", "d",
            "--results-dir", str(results))
    code, out, err = run_cli(capsys, *argv, "--results-dir", str(results))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("harness: error:") and needle in err


def test_thread_counts_that_never_meet_the_harness_cpus_are_named(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    write_session(results, HARNESS, cpus=2.0)
    rows = [f"{m},{threads},{v},x" for m, v in MEDIANS.items() for threads in (1, 4)]
    run_cli(capsys, "import-device", str(write_device_csv(tmp_path / "d.csv", rows)), "--device", "d",
            "--results-dir", str(results))
    code, _, err = run_cli(capsys, "regress", "--device", "d", "--results-dir", str(results))
    assert code == 2 and err.count("\n") == 1
    assert "thread counts (1, 4) never equal the harness's cpus (2)" in err


def test_a_degenerate_group_is_skipped_with_its_reason_and_the_rest_fitted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    session = write_session(results, HARNESS, cpus=2.0).name
    write_session(results, {"net_a": [1.0], "net_b": [1.0], "net_c": [2.0]}, cpus=1.0, session_id=session)
    rows = [f"{m},{threads},{v * threads},x" for m, v in MEDIANS.items() for threads in (1, 2)]
    run_cli(capsys, "import-device", str(write_device_csv(tmp_path / "d.csv", rows)), "--device", "d",
            "--results-dir", str(results))
    code, out, err = run_cli(capsys, "regress", "--device", "d", "--results-dir", str(results), "--json")
    assert code == 0, err
    assert [c["group"] for c in json.loads(out)["calibrations"]] == [{"cpus": 2.0}]
    assert "latency_ms cpus=1: not fitted: leaving one model out leaves identical harness values" in err
