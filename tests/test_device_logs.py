"""import-device reads what the device tools print: one test per format, each number checked against the one the
log states (converted to harness units by hand here), plus unknown text, repeats and the per-op profile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness.cli import main
from harness.device.data import load_device
from tests.device_log_texts import (
    OLD_BENCHMARK_MODEL_LOG,
    OLD_ORT_PERF_TEST_LOG,
    benchmark_model_log,
    dumpsys_meminfo,
    jtop_csv,
    ort_perf_test_log,
    tegrastats_log,
)

MIB = 2**20
MOBILENET_OPS = [("CONV_2D", 15, 0.824), ("DEPTHWISE_CONV_2D", 13, 0.456), ("AVERAGE_POOL_2D", 1, 0.024),
                 ("SOFTMAX", 1, 0.010), ("RESHAPE", 1, 0.006)]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def import_json(capsys: pytest.CaptureFixture[str], results: Path, *argv: str, device: str = "dev") -> dict[str, Any]:
    capsys.readouterr()
    code = main(["import-device", *argv, "--device", device, "--results-dir", str(results), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def import_error(capsys: pytest.CaptureFixture[str], results: Path, *argv: str) -> str:
    capsys.readouterr()
    code = main(["import-device", *argv, "--device", "dev", "--results-dir", str(results)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("harness: error: "), err
    return err


def only_model(result: dict[str, Any]) -> dict[str, Any]:
    (model,) = result["models"]
    return model


def test_benchmark_model_log_gives_latency_load_memory_threads_and_the_op_profile(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write(tmp_path / "run.txt", benchmark_model_log("/data/local/tmp/mobilenet_v1_0.25_128_quant.tflite",
                                                           1369.56, threads=4, ops=MOBILENET_OPS))
    result = import_json(capsys, tmp_path / "results", str(log))
    model = only_model(result)
    assert (model["model"], model["cpus"], model["n"]) == ("mobilenet_v1_0.25_128_quant", 4.0, 1)
    assert model["values"] == {
        "latency_ms": pytest.approx(1.36956),  # Inference (avg): 1369.56 us
        "load_s": pytest.approx(0.003862),  # Init: 3862 us
        "rss_delta_mib": pytest.approx(4.02734),  # footprint delta overall=, KiB / 1024.0
        "peak_rss_mib": pytest.approx(9.42188),  # peak via periodic monitoring, KiB / 1024.0
        "size_mib": pytest.approx(0.492592e6 / MIB),  # model file size, bytes / 1e6
    }
    assert result["sources"][0]["format"] == "benchmark_model" and result["op_profiles"] == 1
    (profile,) = load_device(tmp_path / "results", "dev").op_profiles
    ops = {op.node_type: op for op in profile.ops}
    # The regular runs' table only: the initialization's ModifyGraphWithDelegate and AllocateTensors are not ops.
    assert set(ops) == {name for name, _, _ in MOBILENET_OPS}
    assert [(ops[name].nodes, ops[name].mean_ms) for name, _, _ in MOBILENET_OPS] == [
        (count, pytest.approx(ms)) for _, count, ms in MOBILENET_OPS]
    total = sum(ms for _, _, ms in MOBILENET_OPS)
    assert profile.share(ops["DEPTHWISE_CONV_2D"]) == pytest.approx(0.456 / total)


def test_older_benchmark_model_wording_and_logcat_prefixes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's `Average inference timings in us` and the older `Peak memory footprint (MB): init= overall=`
    line; and the same log as the Android benchmark app writes it to logcat, each line prefixed."""
    old = import_json(capsys, tmp_path / "r1", str(write(tmp_path / "old.txt", OLD_BENCHMARK_MODEL_LOG)))
    model = only_model(old)
    assert model["model"] == "mobilenet_quant_v1_224" and model["cpus"] is None  # no thread count stated
    assert model["values"] == {"latency_ms": pytest.approx(79.7609), "load_s": pytest.approx(0.038467),
                               "rss_delta_mib": pytest.approx(21.25)}
    (profile,) = load_device(tmp_path / "r1", "dev").op_profiles
    assert {op.node_type: op.mean_ms for op in profile.ops} == {"CONV_2D": 1.406, "DEPTHWISE_CONV_2D": 0.169}

    plain = benchmark_model_log("/data/local/tmp/net.tflite", 2500.5, threads=2, ops=MOBILENET_OPS)
    logcat = "".join(f"07-08 15:33:55.768 I/tflite  ( 5395): {line.removeprefix('INFO: ')}\n"
                     for line in plain.splitlines())
    from_logcat = import_json(capsys, tmp_path / "r2", str(write(tmp_path / "logcat.txt", logcat)))
    from_stdout = import_json(capsys, tmp_path / "r3", str(write(tmp_path / "stdout.txt", plain)))
    assert only_model(from_logcat)["values"] == only_model(from_stdout)["values"]
    assert only_model(from_logcat)["values"]["latency_ms"] == pytest.approx(2.5005)
    logcat_ops = load_device(tmp_path / "r2", "dev").op_profiles[0].ops
    assert logcat_ops == load_device(tmp_path / "r3", "dev").op_profiles[0].ops and len(logcat_ops) == 5


def test_profiler_timings_line_is_the_latency_when_no_inference_timings_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Logs cut to the op profile keep only its `Timings (microseconds): ... avg=` line: that is the latency."""
    full = benchmark_model_log("/sdcard/net.tflite", 1369.56, ops=MOBILENET_OPS)
    cut = full[full.index("INFO: Operator-wise Profiling Info for Regular Benchmark Runs:"):]
    result = import_json(capsys, tmp_path / "results", f"net={write(tmp_path / 'cut.txt', cut)}")
    assert only_model(result)["values"] == {"latency_ms": pytest.approx(1.3408)}  # avg=1340.8 us, not the init's
    assert any("op profiler's Timings line" in note for note in result["sources"][0]["notes"])


def test_onnxruntime_perf_test_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write(tmp_path / "perf.txt", ort_perf_test_log(average_ms=5.123, p50_s=0.0051, peak_bytes=35135488))
    result = import_json(capsys, tmp_path / "results", f"squeezenet1_1={log}")
    model = only_model(result)
    assert model["model"] == "squeezenet1_1" and result["sources"][0]["format"] == "onnxruntime_perf_test"
    assert model["values"] == {
        "latency_ms": pytest.approx(5.123), "load_s": pytest.approx(0.0418),
        "peak_rss_mib": pytest.approx(35135488 / MIB),  # ru_maxrss * 1024 bytes
        "latency_min_ms": pytest.approx(4.9), "latency_max_ms": pytest.approx(7.1),
        "latency_p50_ms": pytest.approx(5.1), "latency_p90_ms": pytest.approx(5.3),
        "latency_p95_ms": pytest.approx(5.5), "latency_p99_ms": pytest.approx(6.2),
        "latency_p999_ms": pytest.approx(7.1),
    }
    old = import_json(capsys, tmp_path / "old", "--model", "resnet", str(write(tmp_path / "old.txt",
                                                                                   OLD_ORT_PERF_TEST_LOG)))
    values = only_model(old)["values"]
    assert only_model(old)["model"] == "resnet"
    assert (values["latency_ms"], values["latency_p50_ms"]) == (pytest.approx(58.8053), pytest.approx(58.7108))


def test_a_log_that_names_no_model_needs_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write(tmp_path / "perf.txt", ort_perf_test_log(5.0, 0.005, 1000))
    err = import_error(capsys, tmp_path / "results", str(log))
    assert f"{log}: onnxruntime_perf_test output does not name its model; name it: MODEL={log} or --model" in err


def test_tegrastats_log_gives_peak_and_average_ram_used(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    used = [1810, 1815, 2240, 2448, 2301, 1822]
    for stamped in (False, True):
        log = write(tmp_path / f"tegra{stamped}.log", tegrastats_log(used, timestamps=stamped))
        result = import_json(capsys, tmp_path / f"results{stamped}", f"resnet18={log}")
        assert result["sources"][0]["format"] == "tegrastats"
        assert only_model(result)["values"] == {"peak_memory_mib": 2448.0,
                                                "avg_memory_mib": pytest.approx(sum(used) / len(used)),
                                                "avg_power_w": 2.163, "power_cpu_w": 0.41, "power_gpu_w": 0.216}


def test_jetson_stats_logger_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """jtop 4.0's RAM column is KiB of used memory; since 4.2 it is a fraction, which says nothing absolute."""
    kib = [1853440, 1858560, 2506752]
    result = import_json(capsys, tmp_path / "results", f"resnet18={write(tmp_path / 'log.csv', jtop_csv(kib))}")
    assert result["sources"][0]["format"] == "jtop_csv"
    assert only_model(result)["values"] == {"peak_memory_mib": 2448.0,
                                            "avg_memory_mib": pytest.approx(sum(kib) / len(kib) / 1024),
                                            "avg_power_w": 2.163}
    unpowered = jtop_csv([0.46, 0.62]).replace(",power cur,power avg", "").replace(",2163,2100", "")
    err = import_error(capsys, tmp_path / "results", f"resnet18={write(tmp_path / 'f.csv', unpowered)}")
    assert "f.csv: its RAM column is a fraction of the total" in err and "tegrastats" in err


def test_dumpsys_meminfo_gives_rss_and_pss_in_kib(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Android 10 and later: `TOTAL PSS:` and `TOTAL RSS:`; earlier: `TOTAL:` (PSS) only. Several snapshots in one
    file: the largest of each."""
    snapshots = dumpsys_meminfo(44224, 93520) + dumpsys_meminfo(51200, 102400)
    result = import_json(capsys, tmp_path / "results", f"net={write(tmp_path / 'mem.txt', snapshots)}")
    assert result["sources"][0]["format"] == "dumpsys_meminfo"
    assert only_model(result)["values"] == {"peak_rss_mib": 100.0, "pss_mib": 50.0}
    old = import_json(capsys, tmp_path / "old", f"net={write(tmp_path / 'old.txt', dumpsys_meminfo(44224, None))}")
    assert only_model(old)["values"] == {"pss_mib": pytest.approx(44224 / 1024)}


def test_unknown_text_is_one_line_naming_the_file_and_the_formats(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    notes = write(tmp_path / "notes.txt", "ran mobilenet on the phone, it felt fast\nlatency maybe 12 ms\n")
    err = import_error(capsys, tmp_path / "results", str(notes))
    assert f"{notes}: not a format import-device reads" in err
    for name in ("csv", "benchmark_model", "onnxruntime_perf_test", "tegrastats", "jtop_csv", "dumpsys_meminfo"):
        assert name in err
    assert "--format" in err
    assert not (tmp_path / "results" / "devices").exists()


def test_several_logs_of_one_model_are_repeats_stored_as_such_and_fitted_as_their_median(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    latencies_us = [1369.56, 1402.1, 2950.0]  # the third run was disturbed
    logs = [write(tmp_path / f"bm{i}.txt", benchmark_model_log("/data/local/tmp/net.tflite", us, ops=MOBILENET_OPS))
            for i, us in enumerate(latencies_us)]
    other = write(tmp_path / "other.txt", benchmark_model_log("/data/local/tmp/other.tflite", 900.0, peak_mb=None))
    results = tmp_path / "results"
    result = import_json(capsys, results, *map(str, logs), str(other))
    rows = {row["model"]: row for row in result["models"]}
    assert rows["net"]["n"] == 3 and rows["net"]["sources"] == [str(log) for log in logs]
    assert rows["net"]["values"]["latency_ms"] == pytest.approx(1.4021)  # the median, not the mean 1.907
    assert rows["other"]["n"] == 1 and "peak_rss_mib" not in rows["other"]["values"]
    device = load_device(results, "dev")
    table = device.table.set_index("model")
    assert table.loc["net", "n"] == 3 and table.loc["net", "latency_ms"] == pytest.approx(1.4021)
    repeats = pd.read_csv(results / "devices" / "dev" / "repeats.csv")
    assert repeats.loc[repeats["model"] == "net", "latency_ms"].tolist() == pytest.approx([1.36956, 1.4021, 2.95])
    (profile,) = device.op_profiles
    assert profile.n == 3 and profile.sources == tuple(str(log) for log in logs)
    capsys.readouterr()
    assert main(["import-device", *map(str, logs), str(other), "--device", "dev", "--results-dir", str(results)]) == 0
    out = capsys.readouterr().out
    assert f"3 repeats of net at cpus=4 ({logs[0]}, {logs[1]}, {logs[2]}): their median kept, n=3" in out
    assert out.strip().splitlines()[-1].startswith("unchanged")  # the same files again rewrite nothing


def test_a_file_given_twice_is_refused_not_counted_as_a_repeat(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    log = write(tmp_path / "bm.txt", benchmark_model_log("/data/local/tmp/net.tflite", 1369.56))
    copy = write(tmp_path / "copy.txt", log.read_text())
    err = import_error(capsys, tmp_path / "results", str(log), str(copy))
    assert f"{copy}: the same content as {log}; give each file once" in err


def test_format_flag_overrides_detection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--format names the reader: the text is read with it, and a file that is not in it gets that reader's
    one-line error."""
    text = "boot ok\n" + tegrastats_log([1500, 1600])
    result = import_json(capsys, tmp_path / "results", "--format", "tegrastats", f"net={write(tmp_path / 'x', text)}")
    assert only_model(result)["values"]["peak_memory_mib"] == 1600.0
    err = import_error(capsys, tmp_path / "results", "--format", "dumpsys_meminfo",
                       f"net={write(tmp_path / 'y', tegrastats_log([1500]))}")
    assert "y: no `TOTAL PSS:` or `TOTAL` line" in err


def test_regress_on_benchmark_model_logs_fits_as_the_same_numbers_in_a_csv(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three logs per model, imported as logs and as a CSV of the same latencies (one row per repeat): regress gives
    the same fits, points, held-out errors and choice, to the last digit."""
    from tests.analysis_fixtures import write_session

    harness = {"net_a": [1.0, 1.2, 1.1], "net_b": [2.0, 2.1, 2.2], "net_c": [4.0, 4.4, 4.2], "net_d": [7.0, 7.2, 7.1],
               "net_e": [9.0, 9.3, 9.1], "net_f": [12.0, 12.5, 12.2]}
    results = tmp_path / "results"
    write_session(results, harness, cpus=4.0)
    device_us = {"net_a": [610.5, 598.25, 640.0], "net_b": [1150.0, 1190.75, 1120.5],
                 "net_c": [2350.0, 2290.5, 2410.0], "net_d": [3900.25, 4010.0, 3880.0],
                 "net_e": [5230.0, 5105.5, 5190.0], "net_f": [6750.0, 6900.0, 6820.5]}
    logs, rows = [], ["model,threads,repeat,latency_us"]
    for model, values in device_us.items():
        for repeat, us in enumerate(values):
            logs.append(str(write(tmp_path / f"{model}_{repeat}.txt",
                                  benchmark_model_log(f"/data/local/tmp/{model}.tflite", us, threads=4))))
            rows.append(f"{model},4,{repeat},{us!r}")
    csv = write(tmp_path / "same.csv", "\n".join(rows) + "\n")
    import_json(capsys, results, *logs, device="from-logs")
    import_json(capsys, results, str(csv), device="from-csv")
    fits = {}
    for device in ("from-logs", "from-csv"):
        capsys.readouterr()
        # --no-library: each device would learn from the other, imported beside it, and name it
        assert main(["regress", "--device", device, "--metric", "latency_ms", "--results-dir", str(results),
                     "--json", "--no-library"]) == 0
        fits[device] = {key: value for key, value in json.loads(capsys.readouterr().out).items() if key != "device"}
    assert fits["from-logs"] == fits["from-csv"]
    (calibration,) = fits["from-logs"]["calibrations"]
    points = {p["harness_model"]: p for p in calibration["points"]}
    assert len(points) == len(device_us)
    for model, values in device_us.items():
        assert points[model]["device"] == pytest.approx(sorted(values)[1] / 1000)  # the median of the three
        assert points[model]["device_n"] == 3
