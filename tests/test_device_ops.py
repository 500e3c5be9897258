"""A device's per-op profile beside the harness's: op kinds across TFLite, XNNPACK and ONNX Runtime names, and
`ops --device` / `compare --per-op --device` on a real per-op session and an imported benchmark_model log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.analysis.op_kinds import DEPTHWISE, device_kind, harness_kind
from harness.cli import main
from tests.device_log_texts import benchmark_model_log
from tests.test_per_op import PROFILE_ARGS, make_depthwise_block, make_residual_cnn

DEVICE_OPS = [("CONV_2D", 2, 0.9), ("DEPTHWISE_CONV_2D", 1, 1.2), ("MEAN", 1, 0.05), ("FULLY_CONNECTED", 1, 0.02),
              ("RESHAPE", 1, 0.01)]


def test_op_kinds_meet_across_runtimes() -> None:
    """TFLite builtin types and the XNNPACK operators its profiler lists (as in a real LiteRT log) meet ONNX
    Runtime's op types, quantized and fused ones included; a depthwise Conv is its own kind."""
    same = [("CONV_2D", "Conv"), ("Convolution (NHWC, QC8) GEMM", "QLinearConv"), ("Convolution (NHWC, F32) IGEMM",
                                                                                    "FusedConv"),
            ("FULLY_CONNECTED", "Gemm"), ("Fully Connected (NC, F32) GEMM", "MatMul"), ("BATCH_MATMUL", "QGemm"),
            ("AVERAGE_POOL_2D", "GlobalAveragePool"), ("MEAN", "AveragePool"), ("Max Pooling (NHWC, S8)", "MaxPool"),
            ("Add (ND, QS8)", "QLinearAdd"), ("RESHAPE", "Flatten"), ("Copy (NC, X8)", "Reshape"),
            ("QUANTIZE", "QuantizeLinear"), ("Convert (NC, F32, QS8)", "QuantizeLinear"),
            ("Convert (NC, QS8, F32)", "DequantizeLinear"), ("RELU6", "Clip"), ("Sigmoid (NC, QS8)", "Sigmoid")]
    for device_type, onnx_type in same:
        assert device_kind(device_type) == harness_kind(onnx_type), (device_type, onnx_type)
    assert device_kind("DEPTHWISE_CONV_2D") == device_kind("Convolution (NHWC, QC8) DWConv") == DEPTHWISE
    assert harness_kind("Conv", depthwise=True) == harness_kind("QLinearConv", depthwise=True) == DEPTHWISE
    assert harness_kind("Conv", depthwise=False) == "Conv"
    assert device_kind("TfLiteXNNPackDelegate") == "TfLiteXNNPackDelegate"  # a whole delegated graph: its own row


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A MobileNet block and a residual CNN profiled per op, and a phone's benchmark_model log of the block."""
    root = tmp_path_factory.mktemp("device-ops")
    block = make_depthwise_block(root / "depthwise_block.onnx")
    cnn = make_residual_cnn(root / "tiny_cnn.onnx")
    results = root / "results"
    assert main(["profile", "--json", "--results-dir", str(results), str(block), str(cnn), "--cpus", "1",
                 *PROFILE_ARGS]) == 0
    log = root / "block.txt"
    log.write_text(benchmark_model_log("/data/local/tmp/depthwise_block.tflite", 2300.0, threads=1, ops=DEVICE_OPS))
    assert main(["import-device", str(log), "--device", "phone", "--results-dir", str(results)]) == 0
    return {"results": results, "block": block, "cnn": cnn}


def json_out(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_ops_device_shows_each_kind_share_on_both_sides(profiled: dict[str, Any],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    result = json_out(capsys, "ops", "depthwise_block", "--device", "phone", "--results-dir", str(profiled["results"]),
                      "--json")
    (table,) = result["tables"]
    harness_ops = [row for row in table["ops"] if row["node_index"] is not None]
    harness_total = sum(row["mean_ms"] for row in harness_ops)
    depthwise_ms = sum(row["mean_ms"] for row in harness_ops if row["depthwise"])
    assert depthwise_ms > 0 and table["depthwise_share"] == pytest.approx(depthwise_ms / harness_total)
    rows = {row["kind"]: row for row in table["device"]["rows"]}
    device_total = sum(ms for _, _, ms in DEVICE_OPS)
    dw = rows[DEPTHWISE]
    assert (dw["types_device"], dw["types_harness"]) == ("DEPTHWISE_CONV_2D", "Conv")
    assert dw["ms_device"] == pytest.approx(1.2) and dw["ms_harness"] == pytest.approx(depthwise_ms)
    assert dw["share_device"] == pytest.approx(1.2 / device_total)
    assert dw["share_harness"] == pytest.approx(depthwise_ms / harness_total)
    assert dw["share_ratio"] == pytest.approx(dw["share_device"] / dw["share_harness"])
    conv = rows["Conv"]  # the stem and the pointwise convolution
    assert conv["ms_harness"] == pytest.approx(sum(r["mean_ms"] for r in harness_ops
                                                   if r["op_type"] == "Conv" and not r["depthwise"]))
    assert rows["AveragePool"]["types_device"] == "MEAN" and rows["AveragePool"]["types_harness"] == "GlobalAveragePool"
    assert rows["Gemm"]["types_device"] == "FULLY_CONNECTED"
    assert sum(row["share_device"] for row in rows.values()) == pytest.approx(1.0)
    assert sum(row["share_harness"] for row in rows.values()) == pytest.approx(1.0)
    assert table["device"]["totals_ms"] == {"device_ms": pytest.approx(device_total),
                                            "harness_ms": pytest.approx(harness_total)}
    capsys.readouterr()
    assert main(["ops", "depthwise_block", "--device", "phone", "--results-dir", str(profiled["results"])]) == 0
    out = capsys.readouterr().out
    assert "per-op time on the device and in the harness" in out and "DEPTHWISE_CONV_2D" in out
    assert f"{dw['share_ratio']:.2f}" in out


def test_compare_per_op_device_gives_each_model_with_a_device_profile(profiled: dict[str, Any],
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    code = main(["compare", "depthwise_block", "tiny_cnn", "--per-op", "--device", "phone", "--json",
                 "--results-dir", str(profiled["results"])])
    out, err = capsys.readouterr()
    assert code == 0
    (comparison,) = json.loads(out)["comparisons"]
    device = comparison["device_per_op"]
    assert device["tiny_cnn"] is None and "device phone has no per-op profile of tiny_cnn" in err
    alone = json_out(capsys, "ops", "depthwise_block", "--device", "phone", "--results-dir", str(profiled["results"]),
                     "--json")["tables"][0]["device"]
    assert [row["kind"] for row in device["depthwise_block"]["rows"]] == [row["kind"] for row in alone["rows"]]
    assert device["depthwise_block"]["totals_ms"]["device_ms"] == pytest.approx(alone["totals_ms"]["device_ms"])


def test_a_model_without_a_device_profile_is_one_line(profiled: dict[str, Any], capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    capsys.readouterr()
    code = main(["ops", "tiny_cnn", "--device", "phone", "--results-dir", str(profiled["results"])])
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1
    assert "device phone has no per-op profile of tiny_cnn (it has: depthwise_block)" in err
    code = main(["compare", "depthwise_block", "tiny_cnn", "--device", "phone", "--results-dir",
                 str(profiled["results"])])
    assert code == 2 and "--device compares per-op profiles: give --per-op too" in capsys.readouterr().err


def test_the_depthwise_column_marks_only_grouped_convolutions(tmp_path: Path) -> None:
    """per_op's `depthwise` cell: True for the Conv whose groups equal its channels, False for the other Convs,
    None for what is not a convolution."""
    from harness.analysis.per_op import OpEvent, RawProfile, build
    from harness.models.facts import node_facts

    block = make_depthwise_block(tmp_path / "block.onnx")
    events = [OpEvent(0, seq, name, op_type, float(seq), 10.0) for seq, (name, op_type) in enumerate(
        [("conv_stem", "Conv"), ("conv_depthwise", "Conv"), ("conv_pointwise", "Conv"), ("pool", "GlobalAveragePool")])]
    per_op = build([RawProfile("onnxruntime", events, [(0.0, 100.0)], [0.2])], [0.2], [0.2], node_facts(block))
    flags = dict(zip(per_op.table["node"], per_op.table["depthwise"], strict=True))
    assert (flags["conv_stem"], flags["conv_depthwise"], flags["conv_pointwise"], flags["pool"]) == (
        False, True, False, None)
    assert per_op.depthwise_share == pytest.approx(0.25)
