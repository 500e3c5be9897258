"""regress / predict end to end: sessions in the real store, a device CSV on disk, the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness import regress
from harness.cli import main
from harness.report.calibration_json import calibration_set_json
from harness.store.results import SCHEMA_VERSION
from tests.analysis_fixtures import write_session

HARNESS = {"net_a": [1.0, 1.2, 1.1], "net_b": [2.0, 2.1, 2.2], "net_c": [4.0, 4.4, 4.2], "net_d": [7.0, 7.2, 7.1],
           "net_e": [9.0, 9.3, 9.1]}
FASTEST = {"net_a": 1.0, "net_b": 2.0, "net_c": 4.0, "net_d": 7.0, "net_e": 9.0}
"""Each model's fastest repeat: the harness value calibration takes for a time (and, when every inference of a run
takes the same time, for a latency)."""
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
    rows = [f"{model}_quant,4,{0.37 * value + 0.05!r},x" for model, value in FASTEST.items()]
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
    assert {p["harness_model"] for p in calibration["points"]} == set(FASTEST)
    assert {p["harness"] for p in calibration["points"]} == set(FASTEST.values())

    regression = regress("phone", results_dir=results)  # what the command prints, from Python
    assert regression.device == "phone"
    as_printed = {"schema_version": SCHEMA_VERSION, "session": regression.session,
                  **calibration_set_json(regression.calibrations)}
    assert json.loads(json.dumps(as_printed, default=str)) == result
    assert regression.harness["latency_ms"].set_index("model_name")["value"].to_dict() == FASTEST


QUICKEST = {"net_a": [0.9, 0.7, 1.0], "net_b": [1.8, 2.1, 1.5], "net_c": [3.1, 4.4, 3.9], "net_d": [7.0, 6.4, 7.1],
            "net_e": [8.8, 8.1, 8.5]}
"""The fastest inference of each run (the others take the run's value in HARNESS)."""
FASTEST_INFERENCE = {"net_a": 0.7, "net_b": 1.5, "net_c": 3.1, "net_d": 6.4, "net_e": 8.1}


@pytest.mark.parametrize(("flags", "harness", "rule", "memory", "memory_rule"), [
    ((), FASTEST_INFERENCE, "fastest inference", MEDIANS, "median"),
    (("--across-repeats", "fastest"), FASTEST, "fastest", FASTEST, "fastest"),
    (("--across-repeats", "median"), MEDIANS, "median", MEDIANS, "median"),
])
def test_repeats_become_the_fastest_inference_the_fastest_repeat_or_the_median(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...], harness: dict[str, float],
        rule: str, memory: dict[str, float], memory_rule: str) -> None:
    """A latency by default takes each model's fastest inference of all repeats (other load only lengthens them),
    memory its median repeat; --across-repeats sets one rule for every metric."""
    results = tmp_path / "results"
    write_session(results, HARNESS, cpus=2.0, fastest=QUICKEST)
    rows = [f"{m},2,{0.5 * harness[m] + 0.25!r},{0.5 * (100.0 + memory[m])!r}" for m in HARNESS]
    csv = write_device_csv(tmp_path / "dev.csv", rows, header="model,threads,latency_ms,peak_memory_mib")
    run_cli(capsys, "import-device", str(csv), "--device", "phone", "--results-dir", str(results))
    code, out, err = run_cli(capsys, "regress", "--device", "phone", "--results-dir", str(results), "--json", *flags)
    assert code == 0, err
    fits = {c["metric"]: c for c in json.loads(out)["calibrations"]}
    assert fits["latency_ms"]["harness_value"] == f"{rule} of 3 repeats"
    assert {p["harness_model"]: p["harness"] for p in fits["latency_ms"]["points"]} == harness
    assert fits["latency_ms"]["ols"]["slope"] == pytest.approx(0.5, abs=1e-9)
    assert fits["peak_memory_mib"]["harness_value"] == f"{memory_rule} of 3 repeats"
    assert fits["peak_memory_mib"]["ols"]["slope"] == pytest.approx(0.5, abs=1e-9)
    code, out, _ = run_cli(capsys, "regress", "--device", "phone", "--results-dir", str(results), *flags)
    assert code == 0 and f"harness value: the {rule} of 3 repeats" in out


def test_each_cpu_count_pairs_with_its_thread_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    session = write_session(results, HARNESS, cpus=1.0).name
    write_session(results, {m: [v / 2 for v in values] for m, values in HARNESS.items()}, cpus=2.0, session_id=session)
    rows = [f"{m},{threads},{slope * (FASTEST[m] / threads)!r},x"
            for m in FASTEST for threads, slope in ((1, 3.0), (2, 5.0))]
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
    fastest = {**FASTEST, "net_f": 3.0, "net_g": 5.0, "net_h": 6.0}
    rows = [f"{m},2,{(2.0 if m in extra else 1.0) * v!r},{'fam_b' if m in extra else 'fam_a'}"
            for m, v in fastest.items()]
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
    rows = [f"{m},2,{2.0 * v + 1.0 + (0.1 if i % 2 else -0.1)!r},x" for i, (m, v) in enumerate(FASTEST.items())]
    run_cli(capsys, "import-device", str(write_device_csv(tmp_path / "d.csv", rows)), "--device", "d",
            "--results-dir", str(results))
    code, out, err = run_cli(capsys, "predict", "--device", "d", "--results-dir", str(results), "--json",
                             "big_net", "mid_net")
    assert code == 0, err
    predictions = {p["model"]: p for p in json.loads(out)["predictions"]}
    assert predictions["big_net"]["out_of_range"] and not predictions["mid_net"]["out_of_range"]
    assert predictions["big_net"]["outside"][0].startswith("harness value 20 outside")
    assert not predictions["mid_net"]["outside"]
    assert "big_net" in err and "outside the calibration models' reach" in err and "mid_net" not in err
    for model, harness in (("big_net", 20.0), ("mid_net", 5.0)):  # their fastest repeats
        p = predictions[model]
        assert p["harness"] == harness
        assert p["pi_low"] < p["predicted"] < p["pi_high"]
        assert p["predicted"] == pytest.approx(2.0 * harness + 1.0, rel=0.02)
    # Farther from the data, the interval widens.
    width = {m: p["pi_high"] - p["pi_low"] for m, p in predictions.items()}
    assert width["big_net"] > width["mid_net"]
    # The table says which figure its harness column is (the JSON's harness_figure): not the summary's median.
    figure = predictions["big_net"]["harness_figure"]
    assert figure == "fastest inference of 3 repeats" == predictions["mid_net"]["harness_figure"]
    code, out, err = run_cli(capsys, "predict", "--device", "d", "--results-dir", str(results), "big_net")
    assert code == 0, err
    assert f"harness: the value the fit reads, latency_ms: the {figure}" in out


def test_predict_on_several_devices_is_one_table_of_models_by_devices(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A Pi and a phone in one table: models as rows, a column per device, each prediction with its interval, from
    the CLI (--device twice) and from Python (device=[...])."""
    import harness

    results = tmp_path / "results"
    write_session(results, {**HARNESS, "mid_net": [5.0, 5.0, 5.0]})
    for device, scale in (("pi", 2.0), ("phone", 0.5)):
        rows = [f"{m},2,{scale * v + (0.1 if i % 2 else -0.1)!r},x" for i, (m, v) in enumerate(FASTEST.items())]
        run_cli(capsys, "import-device", str(write_device_csv(tmp_path / f"{device}.csv", rows)), "--device", device,
                "--results-dir", str(results))
    code, out, err = run_cli(capsys, "predict", "--device", "pi", "--device", "phone", "--results-dir", str(results),
                             "--no-library", "mid_net")
    assert code == 0, err
    text = " ".join(out.split())
    assert "predicted latency by device" in text and "│ mid_net │ latency_ms │" in text
    assert text.index("pi") < text.index("phone")
    both = harness.predict(["mid_net"], device=["pi", "phone"], library=False, results_dir=results)
    assert both.devices == ["pi", "phone"] and {p.device for p in both.rows} == {"pi", "phone"}
    wide = both.by_device.set_index("model")
    assert list(wide.columns[-2:]) == ["pi", "phone"]
    for device, scale in (("pi", 2.0), ("phone", 0.5)):
        predicted = float(wide.loc["mid_net", device].split(" [")[0])
        assert predicted == pytest.approx(scale * 5.0, rel=0.05)
        assert wide.loc["mid_net", device] in text
    code, out, _ = run_cli(capsys, "predict", "--device", "pi", "--device", "phone", "--results-dir", str(results),
                           "--no-library", "--json", "mid_net")
    assert json.loads(out)["devices"] == ["pi", "phone"]


def test_predict_warns_when_a_minimum_is_over_fewer_inferences_than_the_calibration_models(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A fastest inference over 2 runs of 10 sits higher than one over 3 runs of 10: named, with the fix."""
    results = tmp_path / "results"
    write_session(results, {**HARNESS, "mid_net": [5.0, 5.0, 5.0], "short_net": [5.0, 5.0]})
    rows = [f"{m},2,{2.0 * v + 1.0!r},x" for m, v in FASTEST.items()]
    run_cli(capsys, "import-device", str(write_device_csv(tmp_path / "d.csv", rows)), "--device", "d",
            "--results-dir", str(results))
    code, _, err = run_cli(capsys, "predict", "--device", "d", "--results-dir", str(results), "mid_net", "short_net")
    assert code == 0, err
    assert ("short_net latency_ms cpus=2: its harness value is the fastest of 20 inferences, the calibration "
            "models' of 30") in err and "REPEATS and ITERATIONS" in err and "mid_net" not in err
    code, _, err = run_cli(capsys, "predict", "--device", "d", "--results-dir", str(results), "short_net",
                           "--across-repeats", "median")
    assert code == 0 and "short_net" not in err  # a median does not drift with the count


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["predict", "--device", "d", "not_profiled"], "no runs of not_profiled"),
        (["regress", "--device", "nodevice"], "run `harness import-device FILE... --device nodevice`"),
        (["regress", "--device", "d", "--metric", "bogus_ms"], "unknown metric 'bogus_ms'"),
        (["regress", "--device", "d", "--metric", "runtime_s"], "has no runtime_s column"),
    ],
)
def test_bad_requests_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                   needle: str) -> None:
    results = tmp_path / "results"
    write_session(results, HARNESS)
    rows = [f"{m},2,{v},x" for m, v in FASTEST.items()]
    run_cli(capsys, "import-device", str(write_device_csv(tmp_path / "d.csv", rows)), "--device", "d",
            "--results-dir", str(results))
    code, out, err = run_cli(capsys, *argv, "--results-dir", str(results))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("harness: error:") and needle in err


def test_thread_counts_that_never_meet_the_harness_cpus_are_named(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    write_session(results, HARNESS, cpus=2.0)
    rows = [f"{m},{threads},{v},x" for m, v in FASTEST.items() for threads in (1, 4)]
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
    rows = [f"{m},{threads},{v * threads},x" for m, v in FASTEST.items() for threads in (1, 2)]
    run_cli(capsys, "import-device", str(write_device_csv(tmp_path / "d.csv", rows)), "--device", "d",
            "--results-dir", str(results))
    code, out, err = run_cli(capsys, "regress", "--device", "d", "--results-dir", str(results), "--json")
    assert code == 0, err
    assert [c["group"] for c in json.loads(out)["calibrations"]] == [{"cpus": 2.0}]
    assert "latency_ms cpus=1: not fitted: leaving one model out leaves identical harness values" in err


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pixel3_quant_tflite.csv"


# The zoo names the Inceptions without their input size, which the phone's table writes.
ZOO_NAMES = {"inception_v1_224_quant": "inception_v1_int8_static", "inception_v3_299_quant": "inception_v3_int8_static"}


def example_session(results: Path, cpus: float = 2.0) -> dict[str, float]:
    """Harness runs for every model of the Pixel 3 example, named as the zoo names them: a power law of the
    phone's latency with 5% log-normal scatter per repeat (seeded), as a noisy harness would give."""
    source = pd.read_csv(EXAMPLE, comment="#")
    rng = np.random.default_rng(3)
    harness = {}
    for row in source.itertuples():
        name = ZOO_NAMES.get(row.model, row.model.replace("_quant", "_int8_static"))
        harness[name] = list(0.3 * row.latency_ms**1.1 * np.exp(rng.normal(0, 0.05, 3)))
    write_session(results, harness, cpus=cpus)
    return harness


def test_regress_on_the_example_data_compares_every_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    example_session(results)
    assert run_cli(capsys, "import-device", str(EXAMPLE), "--device", "pixel-3", "--results-dir", str(results))[0] == 0
    code, out, err = run_cli(capsys, "regress", "--device", "pixel-3", "--results-dir", str(results), "--json",
                             "--no-library")
    assert code == 0, err
    (calibration,) = json.loads(out)["calibrations"]
    assert len(calibration["points"]) == 21
    assert calibration["threads"] == "device threads 4; no harness runs at CPUS=4, so harness CPUS=2 is used"
    fits = {row["fit"]: row for row in calibration["fits"]}
    assert list(fits) == ["ols", "ops", "relative", "loglog", "kernels", "features", "work", "library", "auto"]
    assert fits["library"]["note"].startswith("needs a library device")
    assert "needs static facts" in fits["features"]["note"] and fits["auto"]["note"].startswith("picked per fold:")
    assert "PER_OP=1" in fits["ops"]["note"]
    # The power law behind the data wins, and the reported figures are the nested ones.
    assert calibration["chosen_fit"] == "loglog" and fits["loglog"]["chosen"]
    assert calibration["stats"]["loo_within_10pct"] == fits["auto"]["within_10pct"]
    code, text, err = run_cli(capsys, "regress", "--device", "pixel-3", "--results-dir", str(results), "--no-library")
    assert code == 0, err
    assert "chosen fit: loglog: device = " in text and "why: most held-out models within ±10%" in text
    for name, row in fits.items():
        if "within_10pct" in row:
            line = next(line for line in text.splitlines() if line.startswith(f"│ {name} "))
            figures = [f"{row['within_10pct']:.0%}", f"{row['within_20pct']:.0%}", f"{row['mape_pct']:.1f}%",
                       f"{row['kendall_tau']:.3f}", f"{row['coverage']:.0%}"]
            assert all(figure in line for figure in figures), (line, figures)


def test_device_threads_are_matched_to_harness_runs_at_the_same_cpus(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    session = write_session(results, HARNESS, cpus=1.0).name
    write_session(results, {m: [v / 2 for v in values] for m, values in HARNESS.items()}, cpus=2.0, session_id=session)
    rows = [f"{m},2,{3.0 * v / 2!r},x" for m, v in FASTEST.items()]
    run_cli(capsys, "import-device", str(write_device_csv(tmp_path / "d.csv", rows)), "--device", "d",
            "--results-dir", str(results))
    code, out, err = run_cli(capsys, "regress", "--device", "d", "--results-dir", str(results), "--json")
    assert code == 0, err
    (calibration,) = json.loads(out)["calibrations"]
    assert calibration["group"] == {"cpus": 2.0}
    assert calibration["threads"] == "device threads 2 matched to harness CPUS=2"
    assert calibration["ols"]["slope"] == pytest.approx(3.0, abs=1e-9)
    code, text, _ = run_cli(capsys, "regress", "--device", "d", "--results-dir", str(results))
    assert "(device threads 2 matched to harness CPUS=2; harness value: the fastest inference of 3 repeats)" in text


def test_two_device_rows_for_one_harness_model_is_an_error_naming_both(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    write_session(results, HARNESS)
    rows = [f"{m},2,{v},x" for m, v in FASTEST.items()] + ["net_a_quant,2,0.4,x"]
    run_cli(capsys, "import-device", str(write_device_csv(tmp_path / "d.csv", rows)), "--device", "d",
            "--results-dir", str(results))
    for command in (["regress"], ["predict", "net_b"]):
        code, out, err = run_cli(capsys, *command, "--device", "d", "--results-dir", str(results))
        assert code == 2 and out == "" and err.count("\n") == 1
        assert "rows net_a and net_a_quant both match harness model net_a" in err and "harness_model column" in err
    # Saying which row stands for net_a settles it; the other is left unmatched.
    rows = [f"{m},2,{v},x,{m if m == 'net_a' else ''}" for m, v in FASTEST.items()] + ["net_a_quant,2,0.4,x,"]
    csv = write_device_csv(tmp_path / "d.csv", rows, header="model,threads,latency_ms,family,harness_model")
    run_cli(capsys, "import-device", str(csv), "--device", "d", "--results-dir", str(results))
    code, out, err = run_cli(capsys, "regress", "--device", "d", "--results-dir", str(results), "--json")
    assert code == 0, err
    (calibration,) = json.loads(out)["calibrations"]
    assert {p["model"] for p in calibration["points"]} == set(FASTEST)
    assert json.loads(out)["unmatched_device_models"] == ["net_a_quant"]


def test_suggest_picks_from_the_region_without_calibration_points_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    rng = np.random.default_rng(9)
    measured = {f"small_{i}": float(x) for i, x in enumerate((1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0))}
    unmeasured = {"mid_a": 2.5, "mid_b": 4.5, "large_a": 40.0, "large_b": 60.0}
    write_session(results, {m: [x] * 3 for m, x in {**measured, **unmeasured}.items()})
    rows = [f"{m},2,{float(2.0 * x**0.9 * np.exp(rng.normal(0, 0.04)))!r},x" for m, x in measured.items()]
    run_cli(capsys, "import-device", str(write_device_csv(tmp_path / "d.csv", rows)), "--device", "d",
            "--results-dir", str(results))
    for fit in ("auto", "ols", "relative", "loglog"):
        code, out, err = run_cli(capsys, "suggest", "--device", "d", "-n", "4", "--fit", fit, "--results-dir",
                                 str(results), "--json")
        assert code == 0, err
        (suggestion,) = json.loads(out)["suggestions"]
        picks = [pick["model"] for pick in suggestion["picks"]]
        assert sorted(picks) == sorted(unmeasured) and picks[0] in ("large_a", "large_b"), (fit, picks)
        widths = [pick["mean_before"] for pick in suggestion["picks"]]
        assert widths == sorted(widths, reverse=True), "each measurement narrows the rest's intervals"
    code, text, err = run_cli(capsys, "suggest", "--device", "d", "-n", "2", "--results-dir", str(results))
    assert code == 0, err
    assert "measure next" in text and "large_" in text
    code, _, err = run_cli(capsys, "suggest", "--device", "d", "-n", "0", "--results-dir", str(results))
    assert code == 2 and "-n 0" in err


def test_the_features_fit_predicts_from_harness_and_static_facts(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    rng = np.random.default_rng(4)
    names = [f"net_{i}" for i in range(10)] + ["new_net", "huge_net", "no_facts_net"]
    x = dict(zip(names, np.exp(rng.uniform(0, 3, len(names))).tolist(), strict=True))
    x["huge_net"] = 100 * max(x.values())
    facts = {m: {"macs": float(np.exp(rng.uniform(17, 21))), "params": float(np.exp(rng.uniform(13, 16)))}
             for m in names[:-1]}
    write_session(results, {m: [value] * 3 for m, value in x.items()}, facts=facts)
    law = {m: float(1e-3 * x[m] ** 0.5 * facts[m]["macs"] ** 0.2) for m in names[:-1]}
    rows = [f"{m},2,{law[m]!r},x" for m in names[:10]]
    run_cli(capsys, "import-device", str(write_device_csv(tmp_path / "d.csv", rows)), "--device", "d",
            "--results-dir", str(results))
    code, out, err = run_cli(capsys, "predict", "--device", "d", "--results-dir", str(results), "--json",
                             "new_net", "no_facts_net", "--fit", "features")
    assert code == 0, err
    predictions = {p["model"]: p for p in json.loads(out)["predictions"]}
    assert predictions["new_net"]["fit"] == "features"
    assert predictions["new_net"]["predicted"] == pytest.approx(law["new_net"], rel=1e-9)
    assert predictions["no_facts_net"]["predicted"] is None
    assert "no_facts_net latency_ms cpus=2: not predicted: no static facts (macs, params)" in err
    # auto picks features for this exact law, but not for a model beyond the calibration models' reach.
    code, out, err = run_cli(capsys, "predict", "--device", "d", "--results-dir", str(results), "--json",
                             "new_net", "huge_net")
    assert code == 0, err
    predictions = {p["model"]: p for p in json.loads(out)["predictions"]}
    huge = predictions["huge_net"]
    assert predictions["new_net"]["fit"] == "features" and huge["fit"] != "features" and huge["out_of_range"]
    assert f"huge_net latency_ms cpus=2: beyond the calibration models' reach (leverage above 3p/n): predicted by " \
           f"{huge['fit']}, not by features" in err


def test_the_ops_fit_predicts_from_the_per_op_split(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A device that runs depthwise convolutions at the harness's speed and the rest 1.8× slower: `auto` picks
    the ops fit and predicts a new model exactly; a model profiled without PER_OP=1 is named, not predicted."""
    results = tmp_path / "results"
    rng = np.random.default_rng(6)
    names = [f"net_{i}" for i in range(10)] + ["new_net", "no_split_net"]
    x = dict(zip(names, np.exp(rng.uniform(0, 3, len(names))).tolist(), strict=True))
    share = {m: float(s) for m, s in zip(names[:-1], rng.uniform(0, 0.4, len(names) - 1), strict=True)}
    write_session(results, {m: [value] * 3 for m, value in x.items()}, depthwise_share=share)
    law = {m: x[m] * (share[m] + 1.8 * (1 - share[m])) for m in names[:-1]}
    rows = [f"{m},2,{law[m]!r},x" for m in names[:10]]
    run_cli(capsys, "import-device", str(write_device_csv(tmp_path / "d.csv", rows)), "--device", "d",
            "--results-dir", str(results))
    code, out, err = run_cli(capsys, "predict", "--device", "d", "--results-dir", str(results), "--json",
                             "new_net", "no_split_net")
    assert code == 0, err
    predictions = {p["model"]: p for p in json.loads(out)["predictions"]}
    assert predictions["new_net"]["fit"] == "ops"
    assert predictions["new_net"]["predicted"] == pytest.approx(law["new_net"], rel=1e-9)
    assert predictions["no_split_net"]["predicted"] is None
    assert "no_split_net latency_ms cpus=2: not predicted: no per-op profile for the ops fit" in err


def test_suggest_before_any_device_data_spreads_the_first_picks(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    sizes = {"mobilenet_v1_0.25_128": 1.0, "mobilenet_v1_0.5_160": 2.5, "mobilenet_v1_0.75_192": 5.0,
             "mobilenet_v1_1.0_224": 9.0, "squeezenet1_0": 6.0, "inception_v3": 60.0}
    write_session(results, {model: [value] * 3 for model, value in sizes.items()})
    code, out, err = run_cli(capsys, "suggest", "--device", "phone", "-n", "3", "--results-dir", str(results),
                             "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["first_picks"] and answer["reason"] == "no device data imported yet"
    (group,) = answer["suggestions"]
    picks = [pick["model"] for pick in group["picks"]]
    assert len(set(picks)) == 3 and group["candidates"] == len(sizes)
    assert "inception_v3" in picks  # the far end of the harness values pins the fit's slope
    # With two models measured (too few to fit), the picks leave them out and say why.
    rows = ["mobilenet_v1_0.25_128,2,2.0,x", "inception_v3,2,120.0,x"]
    run_cli(capsys, "import-device", str(write_device_csv(tmp_path / "d.csv", rows)), "--device", "phone",
            "--results-dir", str(results))
    code, text, err = run_cli(capsys, "suggest", "--device", "phone", "-n", "2", "--results-dir", str(results))
    assert code == 0, err
    assert "fewer than 3 of its models" in err and "measure these first" in text
    assert "inception_v3" not in text and "mobilenet_v1_0.25_128 " not in text


def test_regress_reports_held_out_figures_per_family(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    harness = {f"mobilenet_v1_{a}_{r}": 0.5 * float(i + 1) for i, (a, r) in enumerate(
        [("0.25", 128), ("0.25", 224), ("0.5", 128), ("0.5", 192), ("0.75", 160), ("0.75", 224), ("1.0", 224)])}
    harness.update({"squeezenet1_0": 2.2, "squeezenet1_1": 1.3})
    write_session(results, {model: [value] * 3 for model, value in harness.items()})
    rows = [f"{m},2,{3.0 * v * (1.25 if m.startswith('squeeze') else 1.0)!r},x" for m, v in harness.items()]
    run_cli(capsys, "import-device", str(write_device_csv(tmp_path / "d.csv", rows)), "--device", "d",
            "--results-dir", str(results))
    code, out, err = run_cli(capsys, "regress", "--device", "d", "--results-dir", str(results), "--json")
    assert code == 0, err
    (calibration,) = json.loads(out)["calibrations"]
    families = {row["family"]: row for row in calibration["families"]}
    assert families["mobilenet_v1"]["n"] == 7 and families["squeezenet"]["n"] == 2
    assert families["across families"]["n"] == 9
    assert families["mobilenet_v1"]["within_10pct"] > families["squeezenet"]["within_10pct"]
    code, text, _ = run_cli(capsys, "regress", "--device", "d", "--results-dir", str(results))
    assert "held-out by family" in text and "across families" in text
