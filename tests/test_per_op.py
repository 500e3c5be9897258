"""Per-operator profiles, end to end with real runtimes: the per-op phase in the limited run, the table joined
with the ONNX graph, the files next to each run, the session's Chrome trace, `harness ops` and compare --per-op."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.analysis.per_op import RAW_DIR, TABLE_CSV, TABLE_JSON, run_dir
from harness.calibration.points import model_facts_table
from harness.cli import main
from harness.models.facts import node_facts
from harness.report.chrome_trace import trace_path
from harness.store.results import list_sessions
from harness.zoo.quantize import quantize
from tests.conftest import save_checked
from tests.helpers import profile_json, session_runs
from tests.test_docker import backend  # noqa: F401 - fixture: an engine and an image of this checkout

PROFILE_ARGS = ("--per-op", "--backend", "local", "--repeats", "2", "--iterations", "20", "--warmup", "3")


def make_residual_cnn(path: Path, channels: int = 16, size: int = 56) -> Path:
    """Conv+Relu, a 1x1 Conv added to it (ORT fuses both pairs), pooling and a Gemm head: real CNN node kinds."""
    rng = np.random.default_rng(0)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)

    inits = [weight("w1", channels, 3, 3, 3), weight("b1", channels), weight("w2", channels, channels, 1, 1),
             weight("w3", channels, channels, 3, 3), weight("fc", 10, channels), weight("fcb", 10)]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv_stem", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu_stem"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv_point"),
        helper.make_node("Add", ["r1", "c2"], ["s"], name="residual"),
        helper.make_node("Conv", ["s", "w3"], ["c3"], name="conv_down", pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["c3"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], name="head", transB=1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])
    graph = helper.make_graph(nodes, "tiny_cnn", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
                              inits)
    return save_checked(graph, path)


def make_depthwise_block(path: Path, channels: int = 16, size: int = 64) -> Path:
    """A MobileNet block: a 3x3 stem, a depthwise 3x3 (groups = channels) and a pointwise 1x1, then a head."""
    rng = np.random.default_rng(1)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)

    inits = [weight("w1", channels, 3, 3, 3), weight("wd", channels, 1, 3, 3),
             weight("wp", 2 * channels, channels, 1, 1), weight("fc", 10, 2 * channels), weight("fcb", 10)]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv_stem", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu_stem"),
        helper.make_node("Conv", ["r1", "wd"], ["c2"], name="conv_depthwise", pads=[1, 1, 1, 1], group=channels),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu_depthwise"),
        helper.make_node("Conv", ["r2", "wp"], ["c3"], name="conv_pointwise"),
        helper.make_node("GlobalAveragePool", ["c3"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], name="head", transB=1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])
    graph = helper.make_graph(nodes, "depthwise_block", [x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return save_checked(graph, path)


@pytest.fixture(scope="module")
def conv_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_residual_cnn(tmp_path_factory.mktemp("models") / "tiny_cnn.onnx")


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory, conv_onnx: Path) -> Path:
    """One real per-op session of the tiny CNN at CPUS=1, shared by the tests that read its files."""
    results = tmp_path_factory.mktemp("results")
    code = main(["profile", "--json", "--results-dir", str(results), str(conv_onnx), "--cpus", "1", *PROFILE_ARGS])
    assert code == 0
    return results


def per_op_json(session_dir: Path, run: dict[str, Any]) -> dict[str, Any]:
    return json.loads((run_dir(session_dir, run["run_id"]) / TABLE_JSON).read_text())


def check_conv_rows(ops: list[dict[str, Any]], model: Path) -> None:
    """Every Conv node of the graph is a row, joined to it, with the graph's MACs and parameter bytes."""
    graph = {f["name"]: f for f in node_facts(model) if f["op_type"] == "Conv"}
    rows = {row["onnx_node"]: row for row in ops if row["op_type"] == "Conv"}
    assert set(rows) == set(graph), (sorted(rows), sorted(graph))
    for name, facts in graph.items():
        assert rows[name]["macs"] == facts["macs"] > 0
        assert rows[name]["param_bytes"] == facts["param_bytes"] > 0
        assert rows[name]["mean_ms"] > 0 and rows[name]["calls"] == 1


def test_each_run_stores_table_raw_trace_and_summary(profiled: Path, conv_onnx: Path) -> None:
    session_dir = list_sessions(profiled)[-1]
    runs = session_runs(profiled)
    assert len(runs) == 2 and all(run["status"] == "ok" for run in runs)
    for run in runs:
        directory = run_dir(session_dir, run["run_id"])
        raw = sorted(p.name for p in (directory / RAW_DIR).iterdir())
        assert any(name.startswith("onnxruntime") and name.endswith(".json") for name in raw), raw
        assert (directory / TABLE_CSV).read_text().startswith("node_index,node,onnx_node,op_type")
        table = per_op_json(session_dir, run)
        check_conv_rows(table["ops"], conv_onnx)
        assert table["iterations"] == 20
        shares = sum(row["share"] for row in table["ops"])
        assert shares == pytest.approx(1.0, abs=1e-6)  # ops plus the two gap rows are the whole profiled call
        coverage = run["per_op"]["coverage"]
        assert coverage["op_sum_ms"] == pytest.approx(sum(r["mean_ms"] for r in table["ops"] if r["node_index"]
                                                          is not None))
        assert coverage["steady_latency_ms"] == pytest.approx(run["latency_stats_ms"]["mean"])
        assert "per-op sum" in coverage["line"] and "between ops" in coverage["line"]
        assert run["op_time_ms"]["Conv"] == pytest.approx(sum(r["mean_ms"] for r in table["ops"]
                                                              if r["op_type"] == "Conv"))
        assert "per_op_files" not in run  # the packed files went to disk, not into runs.jsonl


def test_quantized_convolutions_join_the_graph_and_give_the_depthwise_share(tmp_path: Path) -> None:
    """ORT fuses each QDQ Conv of a static int8 model into a QLinearConv named `<conv>_token_<n>`: every one
    is joined to its graph Conv (MACs included), and the run records the share of operator time in the
    depthwise one, which the `ops` calibration fit reads."""
    model = quantize(make_depthwise_block(tmp_path / "block.onnx"), "static")
    graph = {f["name"]: f for f in node_facts(model) if f["op_type"] == "Conv"}
    assert {name for name, f in graph.items() if f["depthwise"]} == {"conv_depthwise"}
    results = tmp_path / "results"
    assert main(["profile", "--json", "--results-dir", str(results), str(model), "--cpus", "1", *PROFILE_ARGS]) == 0
    session_dir, runs = list_sessions(results)[-1], session_runs(results)
    for run in runs:
        ops = per_op_json(session_dir, run)["ops"]
        convs = {row["onnx_node"]: row for row in ops if row["op_type"] == "QLinearConv"}
        assert set(convs) == set(graph), sorted(row["node"] for row in ops)
        assert all(convs[name]["macs"] == f["macs"] > 0 for name, f in graph.items())
        op_sum = sum(row["mean_ms"] for row in ops if row["node_index"] is not None)
        share = run["per_op"]["depthwise_share"]
        assert share == pytest.approx(convs["conv_depthwise"]["mean_ms"] / op_sum) and 0 < share < 1
    facts = model_facts_table(runs)
    assert facts.loc[runs[0]["model_name"], "depthwise_share"] == pytest.approx(
        np.median([run["per_op"]["depthwise_share"] for run in runs]))


def test_profile_phase_comes_after_the_timed_phase(profiled: Path) -> None:
    for run in session_runs(profiled):
        names = [name for name, _ in run["phases_s"]]
        assert names.index("profile") > names.index("steady")
        assert len(run["latencies_ms"]) == 20  # the headline holds the timed phase's calls only


def test_session_trace_is_valid_trace_event_json(profiled: Path) -> None:
    session_dir = list_sessions(profiled)[-1]
    runs = session_runs(profiled)
    document = json.loads(trace_path(session_dir, runs[0]["model_name"], 1.0).read_text())
    events = document["traceEvents"]
    assert document["displayTimeUnit"] == "ms"
    for event in events:
        assert event["ph"] in ("X", "M") and isinstance(event["name"], str) and isinstance(event["pid"], int)
        if event["ph"] == "X":
            assert isinstance(event["tid"], int)
            assert isinstance(event["ts"], (int, float)) and event["ts"] >= 0
            assert isinstance(event["dur"], (int, float)) and event["dur"] >= 0
            assert isinstance(event["cat"], str)
        else:
            assert event["name"] in ("process_name", "process_sort_index", "thread_name")
            assert "name" in event["args"]
    for pid in range(1, len(runs) + 1):
        mine = [e for e in events if e["pid"] == pid and e["ph"] == "X"]
        phases = {e["name"]: e for e in mine if e["cat"] == "phase"}
        calls = [e for e in mine if e["cat"] == "inference"]
        ops = [e for e in mine if e["cat"] not in ("phase", "inference")]
        assert len(calls) == 20 and {"steady", "profile"} <= set(phases)
        profile = phases["profile"]
        assert profile["ts"] >= phases["steady"]["ts"] + phases["steady"]["dur"]
        for op in ops:  # each operator sits inside its inference's span, inside the profile phase
            call = calls[op["args"]["inference"]]
            assert call["ts"] - 1 <= op["ts"] and op["ts"] + op["dur"] <= call["ts"] + call["dur"] + 1
            assert profile["ts"] <= op["ts"] <= profile["ts"] + profile["dur"] + 1e3
        assert sum(e["dur"] for e in ops) <= sum(e["dur"] for e in calls)
        assert sum(1 for e in ops if e["cat"] == "Conv") == 3 * 20


def test_ops_command_prints_the_table_and_json(profiled: Path, conv_onnx: Path, capsys) -> None:
    capsys.readouterr()
    assert main(["ops", str(conv_onnx), "--results-dir", str(profiled), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    (table,) = document["tables"]
    assert table["iterations"] == 40  # both runs pooled
    check_conv_rows(table["ops"], conv_onnx)
    assert main(["ops", "tiny_cnn", "--results-dir", str(profiled), "--by", "type", "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "Conv" in out and "op type" in out


def test_ops_names_the_fix_when_nothing_was_profiled(tmp_path: Path, capsys) -> None:
    assert main(["ops", "nothing", "--results-dir", str(tmp_path)]) != 0
    err = capsys.readouterr().err
    assert "--per-op" in err and "Traceback" not in err


def test_compare_per_op_shows_op_type_deltas(in_tmp_cwd: Path, conv_onnx: Path, capsys) -> None:
    """Two models in one session: compare's per-op rows are the op-type time differences measured."""
    wide = make_residual_cnn(in_tmp_cwd / "wide_cnn.onnx", channels=64)
    profile_json(capsys, in_tmp_cwd / "results", str(conv_onnx), str(wide), "--cpus", "1", *PROFILE_ARGS)
    assert main(["compare", str(conv_onnx), str(wide), "--per-op", "--json", "--results-dir",
                 str(in_tmp_cwd / "results")]) == 0
    (comparison,) = json.loads(capsys.readouterr().out)["comparisons"]
    rows = {row["family"]: row for row in comparison["per_op"]["rows"]}
    conv = rows["Conv"]
    assert conv["ms_b"] > conv["ms_a"] > 0  # four times the channels: the convolutions cost more
    assert conv["delta_ms"] == pytest.approx(conv["ms_b"] - conv["ms_a"])
    assert abs(conv["delta_ms"]) == max(abs(row["delta_ms"]) for row in rows.values())


def test_torch_model_gets_a_table_with_macs(in_tmp_cwd: Path, capsys) -> None:
    pytest.importorskip("torch")
    script = in_tmp_cwd / "net.py"
    script.write_text(
        "import torch\n"
        "def build():\n"
        "    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),\n"
        "                                torch.nn.Linear(8 * 16 * 16, 10))\n"
        "    return model, (torch.randn(1, 3, 16, 16),)\n")
    profile_json(capsys, in_tmp_cwd / "results", str(script), "--cpus", "1", *PROFILE_ARGS)
    run = session_runs(in_tmp_cwd / "results")[0]
    assert run["status"] == "ok", run["stderr_tail"]
    table = per_op_json(list_sessions(in_tmp_cwd / "results")[-1], run)
    assert table["framework"] == "torch"
    rows = {row["op_type"]: row for row in table["ops"]}
    assert rows["conv2d"]["macs"] == 8 * 16 * 16 * 3 * 3 * 3
    assert rows["conv2d"]["param_bytes"] == (8 * 3 * 3 * 3 + 8) * 4
    assert rows["linear"]["macs"] == 8 * 16 * 16 * 10
    assert run["op_time_ms"]["conv2d"] > 0


def test_litert_says_it_has_no_op_profiler(in_tmp_cwd: Path, capsys) -> None:
    pytest.importorskip("ai_edge_litert")
    from tests.tflite_model import make_tflite_model

    model = make_tflite_model(in_tmp_cwd / "dense.tflite")
    profile_json(capsys, in_tmp_cwd / "results", str(model), "--cpus", "1", *PROFILE_ARGS)
    run = session_runs(in_tmp_cwd / "results")[0]
    assert run["status"] == "ok"
    assert "no op profiler" in run["per_op"]["note"] and "op_time_ms" not in run


@pytest.mark.usefixtures("backend")
def test_docker_backend_brings_the_profile_out_of_the_container(in_tmp_cwd: Path, conv_onnx: Path, capsys) -> None:
    """The container's read-only root and tmpfs /tmp: the raw trace travels in the RunResult and lands on the host."""
    results = in_tmp_cwd / "results"
    profile_json(capsys, results, str(conv_onnx), "--cpus", "1", *PROFILE_ARGS[3:], "--backend", "docker",
                 "--per-op")
    session_dir = list_sessions(results)[-1]
    for run in session_runs(results):
        assert run["status"] == "ok" and run["backend"] == "docker", run.get("stderr_tail")
        assert any((run_dir(session_dir, run["run_id"]) / RAW_DIR).glob("onnxruntime*.json"))
        check_conv_rows(per_op_json(session_dir, run)["ops"], conv_onnx)
    assert trace_path(session_dir, "tiny_cnn", 1.0).is_file()


def test_coverage_line_names_the_largest_gap() -> None:
    """Below 80% of the headline the line says so and names the gap that explains most of the difference."""
    from harness.analysis.per_op import coverage_of

    slow_steady = coverage_of(op_sum=6.0, run_ms=6.5, wall=[7.0, 7.0], steady_means=[10.0], steady_medians=[10.0])
    assert slow_steady["coverage"] == pytest.approx(0.6)
    assert slow_steady["coverage_of_profiled"] == pytest.approx(6.0 / 7.0)
    assert slow_steady["profiling_overhead"] == pytest.approx(-0.3)
    assert slow_steady["line"].startswith("below 80%, mostly steady minus profiled latency")
    executor = coverage_of(op_sum=5.0, run_ms=9.0, wall=[9.5], steady_means=[9.4], steady_medians=[9.4])
    assert executor["line"].startswith("below 80%, mostly between ops") and executor["between_ops_ms"] == 4.0
    covered = coverage_of(op_sum=9.0, run_ms=9.5, wall=[10.0], steady_means=[10.0], steady_medians=[10.0])
    assert covered["coverage"] == pytest.approx(0.9) and not covered["line"].startswith("below")


def test_op_deltas_line_up_quantized_types_by_family() -> None:
    """Conv against QLinearConv is one row (family Conv); a type only one side has is a row of its own."""
    from harness.analysis.op_deltas import op_deltas
    from harness.analysis.per_op import OpEvent, RawProfile, build

    def profile(ops: list[tuple[str, float]]) -> RawProfile:
        events, ts = [], 0.0
        for seq, (op_type, dur_us) in enumerate(ops):
            events.append(OpEvent(0, seq, f"n{seq}", op_type, ts, dur_us))
            ts += dur_us
        return RawProfile("onnxruntime", events, [(0.0, ts + 100.0)], [(ts + 200.0) / 1000])

    float_model = build([profile([("Conv", 3000.0), ("Conv", 1000.0), ("Gemm", 500.0)])], [5.0], [5.0])
    int8_model = build([profile([("QuantizeLinear", 200.0), ("QLinearConv", 1500.0), ("QGemm", 400.0)])], [3.0], [3.0])
    rows = {row["family"]: row for row in op_deltas(float_model, int8_model)["rows"]}
    assert rows["Conv"]["types_a"] == "Conv" and rows["Conv"]["types_b"] == "QLinearConv"
    assert rows["Conv"]["delta_ms"] == pytest.approx(1.5 - 4.0) and rows["Conv"]["ratio"] == pytest.approx(1.5 / 4.0)
    assert rows["Gemm"]["delta_ms"] == pytest.approx(-0.1)
    assert rows["QuantizeLinear"]["ms_a"] == 0.0 and rows["QuantizeLinear"]["ratio"] is None
    assert list(rows)[0] == "Conv"  # the largest change first


def test_nodes_onnxruntime_fuses_join_the_graph_node_they_came_from(tmp_path: Path) -> None:
    """A Gemm with its Relu runs as `fused <gemm>` (FusedGemm), x·sigmoid(x) as `<mul>/QuickGeluFusion/` (QuickGelu),
    and a MatMul of tokens with its bias Add as `<matmul>/MatMulAddFusion` (a Gemm between two Reshapes the engine
    inserts): each row joins the graph node it is named after, as onnxruntime itself profiled them."""
    import onnxruntime as ort

    from harness.analysis.onnx_join import OnnxJoin

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((32, 64)).astype(np.float32), "w")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 16)).astype(np.float32), "w2")
    bias = numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "bias")
    nodes = [helper.make_node("Gemm", ["x", "w"], ["g"], name="fc", transB=1),
             helper.make_node("Relu", ["g"], ["r"], name="fc_relu"),
             helper.make_node("Sigmoid", ["r"], ["s"], name="silu_sigmoid"),
             helper.make_node("Mul", ["r", "s"], ["y"], name="silu"),
             helper.make_node("MatMul", ["tokens", "w2"], ["t"], name="linear"),
             helper.make_node("Add", ["t", "bias"], ["z"], name="linear_bias")]
    graph = helper.make_graph(nodes, "fused", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64]),
                                               helper.make_tensor_value_info("tokens", TensorProto.FLOAT, [1, 8, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32]),
                               helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 8, 16])], [w, w2, bias])
    path = save_checked(graph, tmp_path / "f.onnx")
    options = ort.SessionOptions()
    options.enable_profiling, options.profile_file_prefix = True, str(tmp_path / "prof")
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    session.run(None, {"x": np.ones((1, 64), np.float32), "tokens": np.ones((1, 8, 32), np.float32)})
    events = json.loads(Path(session.end_profiling()).read_text())
    traced = {e["args"]["op_name"]: e["name"].removesuffix("_kernel_time") for e in events
              if e.get("cat") == "Node" and e["name"].endswith("_kernel_time") and "reshape" not in e["name"]}
    assert set(traced) == {"FusedGemm", "QuickGelu", "Gemm"}, traced
    join = OnnxJoin(node_facts(path))
    assert join.find(traced["FusedGemm"], "FusedGemm")["name"] == "fc"
    assert join.find(traced["QuickGelu"], "QuickGelu")["name"] == "silu"
    assert join.find(traced["Gemm"], "Gemm")["name"] == "linear"
