"""`harness probe export` and `probe import`: designed kernels converted for ncnn (pnnx) and LiteRT (onnx2tf), timed in
ncnn's benchncnn output format and LiteRT's benchmark_model log format, imported back as kernel tables; and the two
importers fuzzed as the device importers are (tests/test_device_fuzz.py's mutations): each output imports or is
refused in one line naming its file, leaving no table behind."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from harness.cli import main
from harness.core.errors import DataError, HarnessError, ModelError
from harness.kernels.detect import detect
from harness.kernels.exchange import MANIFEST, SCRIPT, import_table
from harness.kernels.graph import Graph
from harness.kernels.predictor import engine_evidence, graph_resolver, samples_of
from harness.kernels.table import find_kernel_table, kernels_root
from tests.device_log_texts import benchmark_model_log
from tests.test_device_fuzz import ENCODINGS, FAST, MUTATIONS, SCRATCH

pytest.importorskip("ncnn")
KERNELS = 6  # sample(6): four convolutions (one per stratum drawn), a Gemm and a MatMul


@pytest.fixture(scope="module")
def ncnn_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("export") / "ncnn"
    assert main(["probe", "export", str(folder), "--engine", "ncnn", "--count", str(KERNELS)]) == 0
    return folder


BENCHNCNN = """
import statistics, sys, time
from pathlib import Path
import ncnn
import numpy as np

folder, loops = Path(sys.argv[1]), int(sys.argv[2])
print(f"loop_count = {loops}\\nnum_threads = 1\\npowersave = 0\\ngpu_device = -1\\ncooling_down = 0")
for line in (folder / "shapes.txt").read_text().splitlines():
    param, shapes = line.split()
    net = ncnn.Net()
    net.opt.num_threads = 1
    net.load_param(str(folder / param))
    net.load_model(str(folder / param.replace(".param", ".bin")))
    arrays = {name: np.random.rand(*reversed([int(d) for d in shape.strip("[]").split(",")])).astype(np.float32)
              for name, shape in zip(net.input_names(), shapes.split("],["), strict=True)}
    feeds = {name: ncnn.Mat(array) for name, array in arrays.items()}  # the arrays outlive the Mats on them
    times = []
    for _ in range(loops):
        began = time.perf_counter()
        with net.create_extractor() as extractor:
            for name, mat in feeds.items():
                extractor.input(name, mat)
            for name in net.output_names():
                extractor.extract(name)
        times.append((time.perf_counter() - began) * 1000)
    print(f"{param:>20}  min = {min(times):7.2f}  max = {max(times):7.2f}  avg = {statistics.fmean(times):7.2f}")
"""
"""benchncnn's loop over the exported kernels, in ncnn's Python bindings (benchncnn itself is in neither ncnn's
wheel nor its sdist, docs/engines.md): a fresh extractor per inference, as benchncnn runs, printed as it prints
(`%20s  min = %7.2f  max = %7.2f  avg = %7.2f` after loop_count and num_threads). It runs in a process of its own:
ncnn and onnxruntime in one process crash (their OpenMP runtimes clash)."""


def benchncnn_output(folder: Path, loops: int = 10) -> tuple[str, dict[str, float]]:
    text = subprocess.run([sys.executable, "-c", BENCHNCNN, str(folder), str(loops)], check=True,
                          capture_output=True, text=True, timeout=300).stdout
    averages = {line.split()[0].removesuffix(".param"): float(line.split()[-1]) for line in text.splitlines()
                if " avg = " in line}
    return text, averages


def test_ncnn_export_and_benchncnn_output_round_trip(ncnn_export: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    manifest = json.loads((ncnn_export / MANIFEST).read_text())
    names = [k["name"] for k in manifest["kernels"]]
    assert len(names) == KERNELS and not manifest["refused"]
    assert all((ncnn_export / f"{n}.param").is_file() and (ncnn_export / f"{n}.bin").is_file() for n in names)
    assert "param=$param" in (ncnn_export / SCRIPT).read_text()
    text, averages = benchncnn_output(ncnn_export)
    (ncnn_export / "benchncnn.txt").write_text(text)
    results = tmp_path / "results"
    assert main(["probe", "import", str(ncnn_export / "benchncnn.txt"), "--engine", "ncnn", "--name", "board-ncnn-1t",
                 "--results-dir", str(results)]) == 0
    table = find_kernel_table("board-ncnn-1t", results)
    assert table is not None and table.meta["threads"] == 1 and table.meta["engine"] == "ncnn"
    rows = table.rows().set_index("kernel")
    assert sorted(rows.index) == sorted(names)
    assert {k: rows.loc[k, "mean_ms"] for k in names} == averages
    assert all((table.path / graph).is_file() for graph in rows["graph"])
    capsys.readouterr()
    assert main(["devices", "--json", "--results-dir", str(results)]) == 0
    assert [t["name"] for t in json.loads(capsys.readouterr().out)["kernel_tables"]] == ["board-ncnn-1t"]
    # each kernel's line names no graph node: it trains as the one kernel its own graph holds, at the time printed
    rules, joins = engine_evidence("ncnn", table.rows(), graph_resolver(table))
    assert not rules.absorb and not joins  # no model measured: every node a kernel of its own
    samples = samples_of(table.rows(), graph_resolver(table), rules).set_index("model")
    assert sorted(samples.index) == sorted(f"{n}.onnx" for n in names)
    assert all(samples.loc[f"{k}.onnx", "ms"] == pytest.approx(averages[k]) for k in names)
    assert all(samples.loc[f"{k}.onnx", "kind"] == detect(Graph.load(graph_resolver(table)(rows.loc[k, "graph"])),
                                                         rules)[0].kind for k in names)
    assert {"Gemm"} <= set(samples["kind"]) and set(samples["kind"]) & {"Conv", "DepthwiseConv", "GroupedConv"}
    # and the table predicts a graph, as a board's table would (an engine with no fusion rules learned)
    assert main(["predict", str(table.path / rows.loc[names[0], "graph"]), "--device", "board-ncnn-1t",
                 "--results-dir", str(results), "--json"]) == 0
    (prediction,) = json.loads(capsys.readouterr().out)["predictions"]
    assert prediction["fit"] == "kernels"
    assert 0 < prediction["pi_low"] <= prediction["predicted"] <= prediction["pi_high"]


def test_litert_export_and_benchmark_model_logs_round_trip(tmp_path: Path) -> None:
    from harness.models.litert_convert import converter_versions

    try:
        converter_versions()
    except ModelError as err:
        pytest.skip(str(err))
    folder = tmp_path / "litert"
    assert main(["probe", "export", str(folder), "--engine", "litert", "--count", "2"]) == 0
    names = [k["name"] for k in json.loads((folder / MANIFEST).read_text())["kernels"]]
    assert names and all((folder / f"{n}.tflite").stat().st_size > 0 for n in names)
    assert "--enable_op_profiling=true" in (folder / SCRIPT).read_text()
    logs = folder / "logs"
    logs.mkdir()
    for index, name in enumerate(names):
        (logs / f"{name}.log").write_text(benchmark_model_log(
            f"/data/local/tmp/harness-probe/{name}.tflite", 800.0 + index, threads=4,
            ops=[("CONV_2D", 1, 0.61 + index), ("PAD", 1, 0.12)]))
    table = import_table(logs, "litert", "phone-litert-4t", folder, tmp_path / "results", "phone", None)
    rows = table.rows()
    assert table.meta["threads"] == 4 and table.meta["device"] == "phone"
    assert set(rows["kernel"]) == set(names) and set(rows["op_type"]) == {"CONV_2D", "PAD"}
    assert rows.groupby("kernel")["model_latency_ms"].first().to_dict() == {
        name: pytest.approx((800.0 + i) / 1000) for i, name in enumerate(names)}


def test_outputs_that_are_not_the_exports_are_refused(ncnn_export: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    out.write_text("num_threads = 1\n  resnet18  min = 1.00  max = 2.00  avg = 1.50\n")
    with pytest.raises(DataError, match=r"out.txt:2: 'resnet18' is no kernel of this export"):
        import_table(out, "ncnn", "x", ncnn_export, tmp_path, None, None)
    out.write_text("  k0000_conv  min = 1.00  max = 2.00  avg = 1.50\n")
    with pytest.raises(DataError, match="does not say its thread count; give --threads"):
        import_table(out, "ncnn", "x", ncnn_export, tmp_path, None, None)
    out.write_text("num_threads = 1\n  k0000_conv  min = 3.00  max = 2.00  avg = 1.50\n")
    with pytest.raises(DataError, match="not in order"):
        import_table(out, "ncnn", "x", ncnn_export, tmp_path, None, None)
    assert not kernels_root(tmp_path).exists()


@pytest.fixture(scope="module")
def seeds(ncnn_export: Path) -> dict[str, tuple[str, ...]]:
    names = [k["name"] for k in json.loads((ncnn_export / MANIFEST).read_text())["kernels"]]
    ncnn_seed = "loop_count = 8\nnum_threads = 2\n" + "".join(
        f"{name:>20}  min = {1.0 + i:7.2f}  max = {2.0 + i:7.2f}  avg = {1.5 + i:7.2f}\n"
        for i, name in enumerate(names))
    logs = "".join(benchmark_model_log(f"/data/local/tmp/{name}.tflite", 900.0, threads=2,
                                       ops=[("CONV_2D", 1, 0.7), ("ADD", 2, 0.1)]) for name in names[:3])
    return {"ncnn": (ncnn_seed,), "litert": (logs, benchmark_model_log(f"/sdcard/{names[0]}.tflite", 1234.5))}


@pytest.mark.parametrize("engine", ["ncnn", "litert"])
@FAST
@given(data=st.data())
def test_fuzzed_tool_outputs_import_or_fail_in_one_line(engine: str, data: st.DataObject, ncnn_export: Path,
                                                        seeds: dict[str, tuple[str, ...]]) -> None:
    text = data.draw(st.sampled_from(seeds[engine]))
    for _ in range(data.draw(st.integers(0, 5))):
        text = data.draw(st.sampled_from(MUTATIONS))(data.draw, text)
    encoding = "utf-8" if data.draw(st.integers(0, 3)) else data.draw(st.sampled_from(ENCODINGS))
    with tempfile.TemporaryDirectory(prefix="probe-fuzz-", dir=SCRATCH) as folder:
        output = Path(folder) / "output.txt"
        output.write_bytes(text.encode(encoding, errors="replace"))
        try:
            table = import_table(output, engine, "fuzzed", ncnn_export, Path(folder), None, None)
        except HarnessError as err:
            message = str(err)
            assert len(message.splitlines()) == 1 and "output.txt" in message, message
            assert not kernels_root(Path(folder)).exists(), "a refused import left files behind"
            event("refused")
            return
        rows = table.rows()
        assert rows["mean_ms"].map(math.isfinite).all() and (rows["mean_ms"] >= 0).all()
        assert rows["model_latency_ms"].map(math.isfinite).all()
        event("imported")
