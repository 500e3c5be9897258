"""Every reader of user files takes time and memory in proportion to its input (checked on inputs 100 times larger
than the tests' own), and past its documented bound refuses in one line naming the file and the bound."""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.analysis import per_op
from harness.cli import main
from harness.core.errors import DataError, ModelError
from harness.device import importer
from harness.device.device_csv import MAX_DEVICE_CSV_COLUMNS
from harness.device.importer import DeviceFile, read_device
from harness.measure import script_output
from harness.measure.ncnn_param import MAX_PARAM_BYTES, layers, param_text
from harness.store import results
from harness.store.results import load_runs
from tests.analysis_fixtures import write_session
from tests.device_log_texts import benchmark_model_log, tegrastats_log

SCALE = 100
RATIO = 300
"""The most the SCALE-times larger input may cost, in time and in memory, as a multiple of the small one's: linear work
costs about SCALE times as much; the margin is for a noisy shared machine (quadratic work costs SCALE² times)."""
FLOOR_S, FLOOR_BYTES = 2.0, 4 * 1024 * 1024
"""Below these the large input passes whatever the ratio: a small input's few milliseconds or KiB are mostly noise."""


def cost(read: Callable[[], object]) -> tuple[float, int]:
    """Seconds (the best of two calls) and peak bytes allocated (traced in a third) of read()."""
    seconds = []
    for _ in range(2):
        started = time.perf_counter()
        read()
        seconds.append(time.perf_counter() - started)
    tracemalloc.start()
    try:
        read()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return min(seconds), peak


def assert_linear(small: Callable[[], object], large: Callable[[], object]) -> tuple[float, float]:
    """The large input (SCALE times the small) costs at most RATIO times the small's time and memory (or the floors);
    the measured ratios."""
    small_s, small_bytes = cost(small)
    large_s, large_bytes = cost(large)
    assert large_s < max(RATIO * small_s, FLOOR_S), (small_s, large_s)
    assert large_bytes < max(RATIO * small_bytes, FLOOR_BYTES), (small_bytes, large_bytes)
    return large_s / small_s, large_bytes / small_bytes


def one_line(err: BaseException) -> str:
    line = str(err)
    assert "\n" not in line
    return line


def oversized(path: Path, size: int) -> Path:
    """A file of `size` bytes (sparse: it takes no disk)."""
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


def device_csv(path: Path, rows: int) -> Path:
    lines = ["model,cpus,latency_ms,peak_memory_kb,family"]
    lines += [f"model_{i},{1 + i % 4},{10 + i % 97}.5,{20000 + i},{'mobilenet' if i % 2 else 'resnet'}"
              for i in range(rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_device_csvs_scale_with_their_rows_and_a_wide_header_is_refused_at_once(tmp_path: Path) -> None:
    small, large = device_csv(tmp_path / "small.csv", 20), device_csv(tmp_path / "large.csv", 20 * SCALE)
    assert len(read_device([DeviceFile(large)], "d").table) == 20 * SCALE
    assert_linear(lambda: read_device([DeviceFile(small)], "d"), lambda: read_device([DeviceFile(large)], "d"))

    wide = tmp_path / "wide.csv"  # a tool that writes one column per sample
    columns = 300_000
    wide.write_text("model," + ",".join(f"s{i}_ms" for i in range(columns)) + "\n"
                    + "m," + ",".join("1.5" for _ in range(columns)) + "\n")
    started = time.perf_counter()
    with pytest.raises(DataError) as caught:
        read_device([DeviceFile(wide)], "d")
    assert time.perf_counter() - started < 5.0
    assert one_line(caught.value).startswith(f"{wide}:1: {columns + 1} columns, more than {MAX_DEVICE_CSV_COLUMNS}, "
                                             "the bound on a device CSV's columns (MAX_DEVICE_CSV_COLUMNS)")


def test_device_logs_scale_with_their_op_tables_and_a_huge_file_is_refused(tmp_path: Path) -> None:
    def log(path: Path, ops: int) -> Path:
        path.write_text(benchmark_model_log("m.tflite", 1340.8, ops=[(f"OP_{i}", 1 + i % 5, 0.01 * (1 + i % 50))
                                                                    for i in range(ops)]))
        return path

    small, large = log(tmp_path / "small.log", 20), log(tmp_path / "large.log", 20 * SCALE)
    assert len(importer.read_device_files([DeviceFile(large, "m")])[2][0].ops) == 20 * SCALE
    assert_linear(lambda: importer.read_device_files([DeviceFile(small, "m")]),
                  lambda: importer.read_device_files([DeviceFile(large, "m")]))

    def tegrastats(path: Path, seconds: int) -> Path:  # a log that grows with the time the tool ran
        path.write_text(tegrastats_log([400 + second % 300 for second in range(seconds)], timestamps=True))
        return path

    small, large = tegrastats(tmp_path / "small.tegra", 60), tegrastats(tmp_path / "large.tegra", 60 * SCALE)
    assert importer.read_device_files([DeviceFile(large, "m")])[2][0].metrics["peak_memory_mib"] == 699
    assert_linear(lambda: importer.read_device_files([DeviceFile(small, "m")]),
                  lambda: importer.read_device_files([DeviceFile(large, "m")]))

    huge = oversized(tmp_path / "huge.log", importer.MAX_DEVICE_FILE_BYTES + 1)
    with pytest.raises(DataError) as caught:
        importer.read_device_files([DeviceFile(huge, "m")])
    assert one_line(caught.value) == (f"{huge}: larger than 64 MiB, the bound on a device file "
                                      "(MAX_DEVICE_FILE_BYTES); give a smaller file")


def test_the_cli_refuses_an_oversized_device_file_in_one_line(tmp_path: Path, capsys) -> None:
    huge = oversized(tmp_path / "huge.csv", importer.MAX_DEVICE_FILE_BYTES + 1)
    assert main(["import-device", str(huge), "--device", "d", "--results-dir", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "MAX_DEVICE_FILE_BYTES" in err and str(huge) in err


def test_runs_jsonl_scales_with_its_runs_and_a_line_past_the_bound_is_refused(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    small = write_session(tmp_path / "small", {"a": [1.0, 2.0, 3.0, 4.0, 5.0], "b": [2.0, 3.0, 4.0, 5.0, 6.0]})
    lines = (small / results.RUNS_FILE).read_text().splitlines()
    large = tmp_path / "large"
    large.mkdir()
    with open(large / results.RUNS_FILE, "w") as handle:
        for copy in range(SCALE):
            for line in lines:
                run = json.loads(line)
                handle.write(json.dumps({**run, "run_id": f"{run['run_id']}-{copy}"}) + "\n")
    assert len(load_runs(large)) == len(lines) * SCALE
    assert_linear(lambda: load_runs(small), lambda: load_runs(large))

    monkeypatch.setattr(results, "MAX_RUN_LINE_BYTES", 64 * 1024)
    long_run = json.loads(lines[0]) | {"run_id": "long", "metrics": {"note": "x" * 70_000}}
    with open(large / results.RUNS_FILE, "a") as handle:
        handle.write(json.dumps(long_run) + "\n" + lines[1] + "\n")
    with pytest.raises(DataError) as caught:
        load_runs(large)
    assert one_line(caught.value) == (f"{large / results.RUNS_FILE}:{len(lines) * SCALE + 1}: a line longer than "
                                      "64 KiB, the bound on a runs.jsonl line (MAX_RUN_LINE_BYTES); remove that line")


def ort_trace(directory: Path, inferences: int, nodes: int = 30) -> Path:
    """An onnxruntime profile of `inferences` calls (the first one skipped as warmup) of a `nodes`-node model."""
    directory.mkdir()
    events, ts = [], 0.0
    for _ in range(inferences):
        events.append({"cat": "Session", "name": "model_run", "ts": ts, "dur": nodes * 10.0 + 5})
        for node in range(nodes):
            events.append({"cat": "Node", "name": f"conv{node}_kernel_time", "ts": ts + 1 + node * 10, "dur": 9.0,
                           "args": {"op_name": "Conv", "parameter_size": "1024"}})
        ts += nodes * 10.0 + 20
    (directory / "trace.json").write_text(json.dumps(events))
    (directory / per_op.META_FILE).write_text(json.dumps({"framework": "onnxruntime", "trace": "trace.json",
                                                          "skip_runs": 1}))
    return directory


def test_per_op_traces_scale_with_their_inferences_and_a_huge_one_is_refused(tmp_path: Path) -> None:
    small, large = ort_trace(tmp_path / "small", 10), ort_trace(tmp_path / "large", 10 * SCALE)
    profile = per_op.load_raw(large)[1]
    assert profile is not None and len(profile.runs) == 10 * SCALE - 1 and len(profile.events) == 30 * len(profile.runs)
    assert_linear(lambda: per_op.load_raw(small), lambda: per_op.load_raw(large))

    oversized(large / "trace.json", per_op.MAX_TRACE_BYTES + 1)
    with pytest.raises(DataError) as caught:
        per_op.load_raw(large)
    assert one_line(caught.value) == (f"{large / 'trace.json'}: larger than 256 MiB, the bound on a per-op trace "
                                      "(MAX_TRACE_BYTES); give a smaller file")


def test_a_scripts_report_scales_with_its_lines_and_is_read_up_to_its_bound(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def report(path: Path, lines: int) -> str:
        path.write_text("".join(json.dumps({"phase": f"p{i}", "t": float(i)}) + "\n" + json.dumps({f"k{i}": i}) + "\n"
                                for i in range(lines)))
        return str(path)

    small, large = report(tmp_path / "small.jsonl", 50), report(tmp_path / "large.jsonl", 50 * SCALE)
    assert len(script_output.read_metrics(large)[0]) == 50 * SCALE
    assert_linear(lambda: script_output.read_metrics(small), lambda: script_output.read_metrics(large))

    monkeypatch.setattr(script_output, "MAX_METRICS_CHARS", 1024 * 1024)
    endless = report(tmp_path / "endless.jsonl", 100_000)  # about 3 MiB
    phases, values, notes = script_output.read_metrics(endless)
    assert 0 < len(phases) < 100_000 and len(values) < 100_000
    assert notes == ["the script's HARNESS_METRICS file was read up to 1 MiB, the bound on it (MAX_METRICS_CHARS); "
                     "report fewer lines"]


def ncnn_param(path: Path, count: int) -> Path:
    """A .param of `count` convolution layers after its Input, as pnnx writes them."""
    lines = ["7767517", f"{count + 1} {count + 1}", "Input in0 0 1 in0 0=224 1=224 2=3"]
    lines += [f"Convolution conv_{i} 1 1 {'in0' if i == 0 else f'x{i - 1}'} x{i} 0=32 1=3 4=1 5=1 6=864"
              for i in range(count)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_ncnn_params_scale_with_their_layers_and_a_huge_one_is_refused(tmp_path: Path) -> None:
    small, large = ncnn_param(tmp_path / "small.param", 60), ncnn_param(tmp_path / "large.param", 60 * SCALE)
    assert len(layers(param_text(large))) == 60 * SCALE + 1
    assert_linear(lambda: layers(param_text(small)), lambda: layers(param_text(large)))

    huge = oversized(tmp_path / "huge.param", MAX_PARAM_BYTES + 1)
    with pytest.raises(ModelError) as caught:
        param_text(huge)
    assert one_line(caught.value) == (f"{huge}: larger than 16 MiB, the bound on an ncnn .param (MAX_PARAM_BYTES); "
                                      "give a smaller file")
