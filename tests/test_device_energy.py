"""Energy per inference from the device's power logs: tegrastats' rails in both wordings, jetson-stats' power
columns and a power meter's CSV, each number checked against the one worked out by hand from the log; the energy
from the benchmark's latency instead of a count; the dynamic energy above an idle log; the one-line refusals; and
`regress` and `predict` on energy imported from logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from tests.analysis_fixtures import write_session
from tests.device_log_texts import benchmark_model_log, jtop4_csv, meter_csv, tegrastats_log
from tests.test_device_logs import import_error, import_json, only_model, write

INPUT_MW = [4520, 4610, 4480, 4390]
"""Four samples 100 ms apart: 18.0 W summed, so 1.8 J over 0.4 s, 4.5 W on average."""


def test_tegrastats_rails_of_a_nano_and_an_orin_give_energy_per_inference(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """1.8 J over 40 inferences is 45 mJ each; the rails' means are the CPU/GPU (Nano) and CPU_GPU_CV/SOC (Orin)
    values the lines hold: 858, 875, 851, 834 mW → 0.8545 W, and so on."""
    rails = {"nano": {"power_cpu_w": 0.8545, "power_gpu_w": 0.45},
             "orin": {"power_cpu_gpu_cv_w": 0.5845, "power_soc_w": 1.35}}
    for board, expected_rails in rails.items():
        log = write(tmp_path / f"{board}.log", tegrastats_log([2448, 2460, 2501, 2455], input_mw=INPUT_MW,
                                                              board=board))
        result = import_json(capsys, tmp_path / f"results_{board}", f"resnet18={log}", "--inferences", "40",
                             "--interval", "100")
        values = only_model(result)["values"]
        assert values["avg_power_w"] == pytest.approx(4.5)
        assert values["energy_mj"] == pytest.approx(45.0)
        assert {rail: values[rail] for rail in expected_rails} == pytest.approx(expected_rails)
        assert "1.8 J over 0.4 s and 40 inferences" in result["sources"][0]["notes"]
        record = json.loads((tmp_path / f"results_{board}" / "devices" / "dev" / "import.json").read_text())
        assert record["energy"] == {"inferences": 40, "interval_ms": 100.0, "idle": None, "idle_s": None}


def test_tegrastats_without_its_interval_cannot_give_energy_over_a_count(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write(tmp_path / "t.log", tegrastats_log([2448, 2460], input_mw=INPUT_MW[:2], timestamps=True))
    err = import_error(capsys, tmp_path / "results", f"net={log}", "--inferences", "40")
    assert f"{log}: tegrastats lines carry no time fine enough to integrate; give --interval MS" in err


def test_jetson_stats_power_columns_integrate_over_their_times(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """jtop 4.2 logs RAM as a fraction, so only power is read. 6.1, 6.3, 6.2 W at 0, 0.5 and 1 s: trapezoids of
    3.1 and 3.125 J, 6.225 J over 1 s; over 25 inferences 249 mJ."""
    log = write(tmp_path / "jtop.csv", jtop4_csv([6100, 6300, 6200], [0.0, 0.5, 1.0]))
    result = import_json(capsys, tmp_path / "results", f"yolo={log}", "--inferences", "25")
    assert result["sources"][0]["format"] == "jtop_csv"
    assert only_model(result)["values"] == pytest.approx({"avg_power_w": 6.225, "energy_mj": 249.0,
                                                          "power_cpu_gpu_cv_w": 0.806, "power_soc_w": 1.86})
    assert "RAM not read: jtop 4.2 and later log it as a fraction of the total" in result["sources"][0]["notes"]


def test_power_meter_csv_in_watts_or_milliamps_and_volts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """3.0, 3.4, 3.2, 3.0 W 0.2 s apart: 1.92 J over 0.6 s (3.2 W), 40 mJ over 48 inferences. 600, 640, 620, 600
    mA at 5 V: 1.86 J (3.1 W), 62 mJ over 30."""
    times = [0.0, 0.2, 0.4, 0.6]
    watts = write(tmp_path / "w.csv", meter_csv(times, watts=[3.0, 3.4, 3.2, 3.0]))
    result = import_json(capsys, tmp_path / "results_w", f"net={watts}", "--inferences", "48")
    assert result["sources"][0]["format"] == "power_csv"
    assert only_model(result)["values"] == pytest.approx({"avg_power_w": 3.2, "energy_mj": 40.0})
    amps = write(tmp_path / "a.csv", meter_csv(times, milliamps=[600, 640, 620, 600], volts=5.0))
    result = import_json(capsys, tmp_path / "results_a", f"net={amps}", "--inferences", "30")
    assert only_model(result)["values"] == pytest.approx({"avg_power_w": 3.1, "energy_mj": 62.0})


@pytest.mark.parametrize(("header", "says"), [
    ("time,current (mA),voltage (V)", ":1: column 'time' names no unit; write it as time_s or time (ms)"),
    ("Time (s),Current,Voltage (V)", ":1: column 'Current' names no unit; write it as current_ma or current (A)"),
    ("Time (s),Power (mA)", ":1: column 'Power (mA)' is a power in ma, a unit of current"),
    ("Time (s),Current (mA)", ":1: no voltage column; log power (W) or current and voltage (mA and V)"),
])
def test_a_meter_column_without_its_unit_is_one_line_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], header: str, says: str) -> None:
    log = write(tmp_path / "m.csv", f"{header}\n0.0,600,5.0\n0.2,640,5.0\n")
    err = import_error(capsys, tmp_path / "results", f"net={log}", "--inferences", "10")
    assert f"{log}{says}" in err


def test_energy_from_the_benchmark_latency_and_above_idle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without a count, the same model's benchmark log gives the time per inference: 2.163 W × 1.36956 ms =
    2.962358 mJ, on the benchmark's row (4 threads). An idle log at 1.5 W leaves 45 × (1 − 1.5/4.5) = 30 mJ of a
    4.5 W run's 45 mJ as dynamic energy."""
    bench = write(tmp_path / "bm.txt", benchmark_model_log("/data/local/tmp/net.tflite", 1369.56, threads=4))
    power = write(tmp_path / "t.log", tegrastats_log([2448, 2460]))
    model = only_model(import_json(capsys, tmp_path / "results", str(bench), f"net={power}"))
    assert model["cpus"] == 4.0
    assert model["values"]["latency_ms"] == pytest.approx(1.36956)
    assert model["values"]["energy_mj"] == pytest.approx(2.163 * 1.36956)
    idle = write(tmp_path / "idle.log", tegrastats_log([1800, 1800, 1800], input_mw=[1500, 1500, 1500]))
    run = write(tmp_path / "run.log", tegrastats_log([2448, 2460, 2501, 2455], input_mw=INPUT_MW))
    model = only_model(import_json(capsys, tmp_path / "idle_results", f"net={run}", "--inferences", "40",
                                   "--interval", "100", "--idle", str(idle)))
    assert model["values"]["dynamic_energy_mj"] == pytest.approx(30.0)
    err = import_error(capsys, tmp_path / "refused", f"net={idle}", "--inferences", "40", "--interval", "100",
                       "--idle", str(run))
    assert f"{idle}: average input power 1.5 W is not above the idle log's 4.5 W" in err


def test_an_idle_start_of_the_log_is_split_off(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--idle-s: tegrastats' first 0.2 s (two lines of 1.5 W at 100 ms) are idle, the four after it the run: 4.5 W,
    45 mJ over 40, 30 mJ of it above idle. A meter's first 0.4 s by its times (1.5 W): the run after it, 3.0, 3.4,
    3.2, 3.0 W from 0.4 to 1.0 s, is 1.92 J, 3.2 W, 40 mJ over 48; 40 × (1 − 1.5/3.2) = 21.25 mJ above idle."""
    log = write(tmp_path / "t.log", tegrastats_log([2448] * 6, input_mw=[1500, 1500, *INPUT_MW]))
    values = only_model(import_json(capsys, tmp_path / "results_t", f"net={log}", "--inferences", "40",
                                    "--interval", "100", "--idle-s", "0.2"))["values"]
    assert (values["avg_power_w"], values["energy_mj"], values["dynamic_energy_mj"]) == pytest.approx((4.5, 45, 30))
    meter = write(tmp_path / "m.csv", meter_csv([0.0, 0.2, 0.4, 0.6, 0.8, 1.0], watts=[1.5, 1.5, 3.0, 3.4, 3.2, 3.0]))
    values = only_model(import_json(capsys, tmp_path / "results_m", f"net={meter}", "--inferences", "48",
                                    "--idle-s", "0.4"))["values"]
    assert (values["avg_power_w"], values["energy_mj"], values["dynamic_energy_mj"]) == pytest.approx(
        (3.2, 40, 21.25))
    err = import_error(capsys, tmp_path / "refused", f"net={log}", "--inferences", "40", "--idle-s", "0.2")
    assert f"{log}: 6 power samples do not split into --idle-s 0.2 s of idle and a run after it" in err
    err = import_error(capsys, tmp_path / "refused", f"net={meter}", "--idle-s", "0.4", "--idle", str(log))
    assert "--idle and --idle-s both given" in err


def test_rails_that_disagree_with_their_total_or_are_missing_are_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nano = tegrastats_log([2448, 2460, 2501], input_mw=INPUT_MW[:3])
    over = write(tmp_path / "over.log", nano.replace("POM_5V_CPU 875/875", "POM_5V_CPU 5875/5875"))
    err = import_error(capsys, tmp_path / "results", f"net={over}")
    assert (f"{over}:2: rails POM_5V_GPU 461 + POM_5V_CPU 5875 = 6336 mW, more than its input rail POM_5V_IN 4610 "
            "mW") in err
    lines = nano.splitlines()
    lines[2] = lines[2][:lines[2].index(" POM_5V_IN")]
    cut = write(tmp_path / "cut.log", "\n".join(lines) + "\n")
    err = import_error(capsys, tmp_path / "results", f"net={cut}")
    assert f"{cut}:3: power rails none where the log's first line has POM_5V_IN, POM_5V_GPU, POM_5V_CPU" in err
    railless = write(tmp_path / "railless.log", "\n".join(line[:line.index(" POM_5V_IN")] for line in lines[:2]))
    err = import_error(capsys, tmp_path / "results", f"net={railless}", "--inferences", "10")
    assert f"{railless}: no line holds an input power rail (POM_5V_IN, VDD_IN in tegrastats" in err
    jtop = jtop4_csv([6100, 6300], [0.0, 0.5]).replace(",6300,", ",600,")
    err = import_error(capsys, tmp_path / "results", f"net={write(tmp_path / 'j.csv', jtop)}")
    assert "j.csv:3: rails VDD_CPU_GPU_CV 819 + VDD_SOC 1890 = 2709 mW, more than its input rail Power TOT 600" in err


HARNESS_MS = {"net_a": 1.0, "net_b": 2.0, "net_c": 4.0, "net_d": 7.0, "net_e": 9.0, "net_f": 12.0, "net_g": 6.0}
POWER_MW = {"net_a": 4990, "net_b": 5020, "net_c": 4980, "net_d": 5010, "net_e": 5000, "net_f": 4995}
"""Six models' benchmark and tegrastats logs: about 5 W each, the device at 0.6× the harness's latency; net_g only
profiled."""


def energy_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A session of the seven models (three repeats each) and the device `dev` imported from the six's logs."""
    results = tmp_path / "results"
    write_session(results, {model: [ms] * 3 for model, ms in HARNESS_MS.items()}, cpus=4.0)
    files = []
    for model, watts in POWER_MW.items():
        device_us = 600.0 * HARNESS_MS[model]
        files.append(str(write(tmp_path / f"{model}.txt",
                               benchmark_model_log(f"/data/local/tmp/{model}.tflite", device_us, threads=4))))
        files.append(f"{model}={write(tmp_path / f'{model}.log', tegrastats_log([2448, 2460], input_mw=[watts] * 2))}")
    import_json(capsys, results, *files)
    capsys.readouterr()
    return results


def test_regress_and_predict_energy_from_imported_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Energy is fitted against the harness's latency, ~3 mJ per harness ms, and predicted for the seventh model
    with an interval."""
    results = energy_device(tmp_path, capsys)
    assert main(["regress", "--device", "dev", "--metric", "energy_mj", "--results-dir", str(results), "--json"]) == 0
    (calibration,) = json.loads(capsys.readouterr().out)["calibrations"]
    points = {p["harness_model"]: p for p in calibration["points"]}
    assert calibration["metric"] == "energy_mj" and len(points) == 6
    for model, watts in POWER_MW.items():
        assert points[model]["harness"] == HARNESS_MS[model]
        assert points[model]["device"] == pytest.approx(watts / 1000 * 0.6 * HARNESS_MS[model])
    assert main(["predict", "--device", "dev", "--metric", "energy_mj", "--results-dir", str(results), "--json",
                 "net_g"]) == 0
    (prediction,) = json.loads(capsys.readouterr().out)["predictions"]
    assert prediction["predicted"] == pytest.approx(3.0 * 6.0, rel=0.01)
    assert prediction["pi_low"] < prediction["predicted"] < prediction["pi_high"]


def test_the_report_shows_the_devices_latency_against_energy(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Energy here grows with latency, so the fastest model is the only one no other beats on both."""
    results = energy_device(tmp_path, capsys)
    assert main(["report", "--results-dir", str(results)]) == 0
    (session,) = [path for path in results.iterdir() if (path / "report").is_dir()]
    table = json.loads((session / "report" / "tables" / "calibration_dev_energy_pareto.json").read_text())
    assert [row["model"] for row in table] == list(POWER_MW)
    assert [row["energy_mj"] for row in table] == pytest.approx(
        [watts / 1000 * 0.6 * HARNESS_MS[model] for model, watts in POWER_MW.items()])
    assert [row["non_dominated"] for row in table] == [True] + [False] * 5
    assert (session / "report" / "figures" / "calibration_dev_energy_pareto.png").stat().st_size > 1000
