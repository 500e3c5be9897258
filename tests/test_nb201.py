"""NAS-Bench-201 in the zoo and HELP's protocol: the builder's parameter counts worked out by hand, its MACs against
the published extremes, cell strings both ways, what `none` and `skip_connect` do, the split and trim, the FLOPs row
against the published one, and the benchmark on a device table that is none of the six."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pandas as pd
import pytest

from harness import zoo
from harness.calibration.nb201 import op_counts, read_devices, score, split
from harness.core.errors import DataError, ModelError
from harness.models.facts import onnx_facts
from harness.zoo import nb201, nb201_cells

ROOT = Path(__file__).resolve().parent.parent
DEVICES_CSV = ROOT / "devices" / "library" / "nb201_latency_ms.csv"
SUMMARY_CSV = ROOT / "benchmarks" / "data" / "nb201_harness.csv"
PUBLISHED_FLOPS = {"pixel2": 0.765, "raspi4": 0.846, "gold_6226": 0.826, "titan_rtx_256": 0.950, "eyeriss": 0.437,
                   "fpga": 0.900}


def _facts(ops: tuple[str, ...], tmp_path: Path) -> dict:
    path = tmp_path / "net.onnx"
    onnx.save(nb201.build(ops, "net"), str(path))
    return onnx_facts(path)


def _outside_cells() -> int:
    """Parameters of everything but the cells, batch norm folded into the convolution before it (a bias of C)."""
    stem = 3 * 16 * 9 + 16
    reduction_1 = (16 * 32 * 9 + 32) + (32 * 32 * 9 + 32) + 16 * 32  # conv_a, conv_b, the shortcut's 1x1 (no bias)
    reduction_2 = (32 * 64 * 9 + 64) + (64 * 64 * 9 + 64) + 32 * 64
    last_norm = 4 * 64  # BatchNormalization after a sum cannot be folded: scale, shift, mean, variance
    classifier = 64 * 10 + 10
    return stem + reduction_1 + reduction_2 + last_norm + classifier


def test_parameter_counts_worked_out_by_hand(tmp_path: Path) -> None:
    all_3x3 = ("nor_conv_3x3",) * 6
    cells = sum(5 * 6 * (9 * c * c + c) for c in (16, 32, 64))
    assert _facts(all_3x3, tmp_path)["params"] == _outside_cells() + cells == 1_528_106
    mixed = ("nor_conv_1x1", "none", "skip_connect", "nor_conv_3x3", "avg_pool_3x3", "none")
    cells = sum(5 * ((c * c + c) + (9 * c * c + c)) for c in (16, 32, 64))
    zero = 1  # the scalar `none` multiplies by
    assert _facts(mixed, tmp_path)["params"] == _outside_cells() + cells + zero
    # PyTorch counts batch norm unfolded (2C each, 5 foldable ones outside the cells and one per convolution):
    # the published 1.53 M for all-3x3 cells.
    assert round((1_528_106 + sum(30 * c for c in (16, 32, 64)) + (16 + 32 + 32 + 64 + 64) - 128) / 1e6, 2) == 1.53


def test_macs_match_the_published_extremes(tmp_path: Path) -> None:
    assert round(_facts(("nor_conv_3x3",) * 6, tmp_path)["macs"] / 1e6, 1) == 220.1
    assert round(_facts(("none",) * 6, tmp_path)["macs"] / 1e6, 2) == 7.78


def test_cell_strings_round_trip_through_the_index() -> None:
    table = read_devices(DEVICES_CSV)
    for index in (0, 1, 55, 899, 1462, 1899):
        ops = nb201_cells.cell_ops(index)
        text = nb201_cells.cell_string(ops)
        assert text == table.loc[index, "arch_str"]
        assert nb201_cells.parse_cell(text) == ops and nb201_cells.index_of(ops) == index
        assert zoo.parse(text).name == zoo.parse(f"nb201_{text}").name == f"nb201_{index}"
    assert zoo.parse("nb201_0042").name == "nb201_42"
    with pytest.raises(ModelError, match="out of range; use 0..15624"):
        zoo.parse("nb201_15625")
    with pytest.raises(ModelError, match="unknown op conv_5x5"):
        zoo.parse("|conv_5x5~0|+|none~0|none~1|+|none~0|none~1|none~2|")


def _run(ops: tuple[str, ...], tmp_path: Path, x: np.ndarray) -> np.ndarray:
    path = tmp_path / "run.onnx"
    onnx.save(nb201.build(ops, "run"), str(path))
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]


def test_none_edges_compute_zeros_and_skip_edges_add_no_node(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    a, b = (rng.normal(size=(1, 3, 32, 32)).astype(np.float32) for _ in range(2))
    # Every cell all `none`: the last stage's cells give zeros whatever the input, so the logits do not depend on it.
    np.testing.assert_array_equal(_run(("none",) * 6, tmp_path, a), _run(("none",) * 6, tmp_path, b))
    graph = nb201.build(("none",) * 6, "n").graph
    assert sum(node.op_type == "Mul" for node in graph.node) == 15 * 6  # the devices ran them: so does the harness
    # Every cell all `skip_connect`: node 3 = x + x + 2x, so the output follows the input, through no extra node.
    skips = nb201.build(("skip_connect",) * 6, "s").graph
    assert {node.op_type for node in skips.node} == {"Conv", "Relu", "AveragePool", "Add", "BatchNormalization",
                                                     "GlobalAveragePool", "Flatten", "Gemm"}
    assert sum(node.op_type == "Conv" for node in skips.node) == 1 + 2 * 3  # stem and the two reduction blocks
    assert not np.allclose(_run(("skip_connect",) * 6, tmp_path, a), _run(("skip_connect",) * 6, tmp_path, b))


def test_work_per_kind_adds_up_to_the_macs(tmp_path: Path) -> None:
    facts = _facts(("nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3", "none", "skip_connect", "nor_conv_3x3"), tmp_path)
    assert facts["work_conv_macs"] + facts["work_pointwise_macs"] + facts["work_dense_macs"] == facts["macs"]
    assert facts["work_depthwise_macs"] == 0 and facts["work_pool_elements"] > 0
    assert facts["work_arithmetic_elements"] > 0 and facts["work_activation_elements"] > 0


def test_the_split_draws_from_0_899_scores_900_1899_and_drops_a_tenth_at_each_end() -> None:
    index = np.arange(2000)
    latency = pd.Series(1.0 + (index * 37 % 1009) / 7, index=index)
    latency[index % 50 == 0] = latency[900:1900].quantile(0.9)  # ties at a quantile stay in
    protocol = split(latency)
    assert set(protocol.pool) < set(range(900)) and set(protocol.test) < set(range(900, 1900))
    for pool, kept in ((range(900), protocol.pool), (range(900, 1900), protocol.test)):
        values = latency[list(pool)]
        low, high = np.quantile(values, [0.1, 0.9])
        assert set(kept) == set(values.index[(values >= low) & (values <= high)])
        assert 0.78 * len(pool) <= len(kept) <= 0.82 * len(pool) + np.sum(values == high)
    assert {i for i in range(900, 1900, 50)} <= set(protocol.test)


def test_flops_rank_the_test_architectures_as_the_published_flops_row() -> None:
    """The protocol check: FLOPs alone (the builder's MACs) on the trimmed test architectures of each device."""
    table = read_devices(DEVICES_CSV)
    macs = pd.Series({index: onnx_facts(zoo.export(f"nb201_{index}"))["macs"] for index in range(900, 1900)})
    for device, published in PUBLISHED_FLOPS.items():
        test = split(table[device]).test
        rho = score(table.loc[test, device].to_numpy(), macs[test].to_numpy())["spearman"]
        assert abs(rho - published) <= 0.03, (device, rho, published)


def test_op_counts_and_a_bad_device_table(tmp_path: Path) -> None:
    counts = op_counts(pd.Series(["|nor_conv_3x3~0|+|none~0|none~1|+|skip_connect~0|nor_conv_3x3~1|none~2|"]))
    assert counts.iloc[0].to_dict() == {"none": 3, "skip_connect": 1, "nor_conv_1x1": 0, "nor_conv_3x3": 2,
                                        "avg_pool_3x3": 0}
    bad = tmp_path / "bad.csv"
    bad.write_text("# a comment\narch_idx,arch_str,phone\n0,|none~0|+|none~0|none~1|+|none~0|none~1|none~2|,abc\n")
    with pytest.raises(DataError, match=r"bad.csv:3: phone latency 'abc' is not a positive number of milliseconds"):
        read_devices(bad)


@pytest.mark.skipif(not SUMMARY_CSV.exists(), reason="no committed harness summary")
def test_the_benchmark_scores_a_device_that_is_none_of_the_six(tmp_path: Path) -> None:
    """DEVICES=file: a user's own device (here latencies made from the graphs' work, with noise), scored with every
    figure, baselines beside; a device row without a latency is one line naming the file and line."""
    summary = pd.read_csv(SUMMARY_CSV, index_col="arch_idx")
    rng = np.random.default_rng(1)
    latency = (0.5 + 4e-8 * summary["work_conv_macs"] + 2e-7 * summary["work_pointwise_macs"]
               + 1e-6 * summary["work_pool_elements"]) * rng.lognormal(0, 0.03, len(summary))
    devices = tmp_path / "mine.csv"
    pd.DataFrame({"arch_str": summary["arch_str"], "my_board": latency}).to_csv(devices, float_format="%.5f")
    out = tmp_path / "nb201.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "nb201.py"), "--devices", str(devices),
                           "--draws", "3", "--out", str(out), "--device", "my_board", "--max-latency-ms", "3"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())["devices"]["my_board"]
    for k in ("k5", "k10", "k20"):
        assert set(figures[k]) >= {"spearman", "kendall", "within_10pct", "coverage"}
    assert figures["k10"]["spearman"] > 0.95 and figures["k10"]["within_10pct"] > 0.8
    assert figures["published"]["HELP (10 samples)"] is None
    assert (tmp_path / "nb201_my_board.md").read_text().startswith("# NAS-Bench-201 on my_board")
    broken = tmp_path / "broken.csv"
    broken.write_text("arch_idx,arch_str,my_board\n0," + summary.loc[0, "arch_str"] + ",\n")
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "nb201.py"), "--devices", str(broken),
                           "--out", str(tmp_path / "x.json")], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode != 0, done.stderr
    assert done.stderr.strip() == (f"bench-nb201: {broken}:2: my_board latency '' is not a positive number of "
                                   "milliseconds")


def test_the_nas_bench_201_file_is_read_once_for_every_table_and_reader() -> None:
    """The library's NAS-Bench-201 tables are columns of a file or two: each file is parsed once, for all its tables
    and for HELP's protocol (read_devices), each caller getting its own copy."""
    from harness.device import library, nb201_table
    from harness.device.library import shipped_tables

    nb201_table._read.cache_clear()
    library._read.cache_clear()
    tables = [table for table in shipped_tables() if table.column]
    columns = {(table.path, table.column): table.values for table in tables}
    frame = read_devices(DEVICES_CSV)
    assert len(tables) >= 6 and nb201_table._read.cache_info().misses == len({table.path for table in tables}) < 3
    shared = [table.column for table in tables if table.path == DEVICES_CSV]
    assert shared and all((columns[DEVICES_CSV, column].to_numpy() == frame[column].to_numpy()).all()
                          for column in shared)
    frame.loc[frame.index[0], "arch_str"] = "changed"
    assert read_devices(DEVICES_CSV).iloc[0]["arch_str"] != "changed"
