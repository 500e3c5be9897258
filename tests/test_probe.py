"""`harness probe` for real on this host: designed kernels that onnxruntime runs as built (none folded, pruned or fused
into another), a probe at a tiny budget whose table `harness devices` lists, with rows that map back to the designed
kernels, and adaptive sampling that goes where the kernels' times are hardest to predict."""

from __future__ import annotations

import json
import math
import random
import time
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pandas as pd
import pytest

from harness.cli import main
from harness.kernels.adaptive import MIN_FIT, next_round, spreads
from harness.kernels.designed import (
    CHANNELS,
    CONV_FUSED,
    CONV_STRATA,
    CONV_WEIGHT,
    GROUP_WIDTHS,
    GROUPED_CHANNELS,
    KINDS,
    MAX_MACS,
    OTHER_RANK_KINDS,
    OVERHEAD,
    PACK_KINDS,
    Kernel,
    _config,
    _stratum,
    macs,
    near,
    out_size,
    sample,
)
from harness.kernels.designed_graphs import kernel_model, write_probe
from harness.kernels.detect import detect
from harness.kernels.graph import OTHER_RANK_CONV, Graph
from harness.kernels.learn import examples_from_table, learn
from harness.kernels.ncnn_layers import designed_absorption, in_run, layer_join, tally, weighted_nodes
from harness.kernels.packing import PACK_MACS, boundary_shapes, pack
from harness.kernels.predictor import end_to_end, engine_evidence, fitted_model, graph_resolver, samples_of
from harness.kernels.probed import kernel_times, per_op_tables, session_rows
from harness.kernels.rules import BLOCKED_MARK, Rules, host_block, load_rules
from harness.kernels.table import GRAPHS_DIR, find_kernel_table
from harness.kernels.training import whole_kernel
from harness.measure.ncnn_param import layers, param_text
from harness.models.facts import node_facts, onnx_facts
from harness.models.ncnn_convert import convert
from harness.models.resolve import content_sha256, resolve_model
from harness.run.probe import Costs, ZooRepeats
from tests.boards import BoardFactory
from tests.test_target import harness, set_up

BUDGET_S = 90
PROBE_ARGS = ("--models", "resnet8_cifar10", "kws_dscnn", "--designed", "12", "--seed", "2", "--budget-min",
              str(BUDGET_S / 60), "--cpus", "1", "--backend", "local")
"""Twelve designed kernels hold four convolutions; those of seed 2 have blocked output channels (240, 96, 32) whose
greatest common power of two is the host's block, which is how rules learned from them find it (seed 0's, 512 and
256, would say 256)."""


def test_sampling_is_deterministic_and_covers_every_kind_and_convolution_stratum() -> None:
    first, again = sample(200, seed=7), sample(200, seed=7)
    assert first == again and first != sample(200, seed=8)
    assert set(Counter(k.kind for k in first)) == set(KINDS)
    convs = [k for k in first if k.kind == "conv"]
    assert {_stratum(k) for k in convs} == set(CONV_STRATA)  # every kernel size x stride x grouping
    assert all(macs(k) <= MAX_MACS for k in first)
    channels = {k.settings["cin"] for k in convs}
    assert channels & {12, 20, 40, 72, 120} and channels & {16, 32, 64}  # off and on the 8/16 blocking
    widths = [k.settings["cin"] // k.settings["groups"] for k in convs if _stratum(k)[2] == "grouped"]  # type: ignore[index]
    assert set(widths) <= set(GROUP_WIDTHS) and len(set(widths)) >= 3  # groups of 4-64 channels, blocked or plain
    grouped = [k for k in convs if _stratum(k)[2] == "grouped"]  # type: ignore[index]
    drawn = Counter((k.settings["kernel"], k.settings["stride"]) for k in grouped)
    assert set(drawn) == {(3, 1), (3, 2), (1, 1)} and drawn.most_common(1)[0][0] == (3, 1)  # as networks group
    many = [k.settings["cin"] for k in sample(1000, seed=7) if k.kind == "conv" and _stratum(k)[2] == "grouped"]  # type: ignore[index]
    assert max(CHANNELS) < max(many) <= GROUPED_CHANNELS  # RegNet's and ResNeXt's widest layers, up to 1,024
    rng = random.Random(0)
    moved = [near(k, rng, "moved") for k in grouped for _ in range(3)]
    assert all(k.settings["cin"] == k.settings["cout"] for k in grouped + moved)  # as ResNeXt and RegNet group
    def width(k: Kernel) -> int:
        return k.settings["cin"] // k.settings["groups"]
    assert all(width(m) == width(k) or m.settings["groups"] == k.settings["groups"]
               for k, m in zip([k for k in grouped for _ in range(3)], moved, strict=True))
    assert all(near(k, rng, "moved").config != k.config for k in first)  # a neighbour is never the kernel itself


def test_packs_keep_every_kernel_apart() -> None:
    kernels = sample(120, seed=1)
    packs = pack(kernels)
    assert sorted(k.name for p in packs for k in p) == sorted(k.name for k in kernels)
    for members in packs:
        assert sum(macs(k) for k in members) <= PACK_MACS or len(members) == 1
        shapes = [boundary_shapes(k) for k in members]
        assert all(not (a & b) for i, a in enumerate(shapes) for b in shapes[i + 1:])


def test_onnxruntime_runs_every_designed_kernel_of_a_probe_graph(tmp_path: Path) -> None:
    """The optimized graph keeps a timed node per kernel: no kernel constant-folded, pruned or fused into another."""
    kernels = sample(44, seed=2)
    for index, members in enumerate(pack(kernels)[:2]):
        graph = write_probe(members, index, tmp_path, "onnxruntime")
        options = ort.SessionOptions()
        options.enable_profiling, options.intra_op_num_threads = True, 1
        options.profile_file_prefix = str(tmp_path / f"trace{index}")
        session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        feeds = {i.name: np.random.rand(*i.shape).astype(np.float32) for i in session.get_inputs()}
        session.run(None, feeds)
        trace = json.loads(Path(session.end_profiling()).read_text())
        timed = {e["name"].split("/")[0] for e in trace if e.get("cat") == "Node" and "/" in e["name"]}
        expected = {k.name for k in members if k.kind != "hardswish"}  # ORT runs HardSwish as HardSigmoid + Mul
        assert expected <= timed, expected - timed
        assert len({e for e in timed if e.endswith(OVERHEAD)}) == 3
        assert len(onnx.load(str(graph)).graph.output) >= len(members)


def drawn_and_run(kind: str, rng: random.Random, count: int, folder: Path) -> list[tuple[Kernel, Path, np.ndarray]]:
    """`count` designed kernels of `kind` drawn from `rng`, each saved as a graph of its own in `folder` and run once
    under onnxruntime: (kernel, its graph, its output)."""
    ran = []
    for index in range(count):
        kernel = Kernel(f"k{index:04d}_{kind}", kind, tuple(sorted(_config(kind, rng).items())))
        path = folder / f"{kernel.name}.onnx"
        onnx.save(kernel_model(kernel), path)
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        [x] = session.get_inputs()
        [y] = session.run(None, {x.name: np.random.rand(*x.shape).astype(np.float32)})
        ran.append((kernel, path, y))
    return ran


@pytest.mark.parametrize("kind", ["gru", "lstm", "deconv", "resize"])
def test_decoder_and_recurrent_kernels_run_at_the_size_they_are_drawn(tmp_path: Path, kind: str) -> None:
    """A designed GRU, LSTM, transposed convolution or resize runs under onnxruntime, its output twice its input's map
    (the decoders) or one hidden state (the recurrent layers), and its MACs are those the graph's facts count (a
    resize, which has none there, by its output's elements)."""
    for kernel, path, y in drawn_and_run(kind, random.Random(5), 6, tmp_path):
        s = kernel.settings
        if kind in ("gru", "lstm"):
            assert y.shape == (1, 1, s["hidden"])
        else:
            assert y.shape[2:] == (2 * s["hw"], 2 * s["hw"])
        counted = sum(node["macs"] for node in node_facts(path))
        assert macs(kernel) == (counted if kind != "resize" else y.size)


@pytest.mark.parametrize("kind", OTHER_RANK_KINDS)
def test_a_1d_or_3d_convolution_runs_at_its_drawn_size_as_a_kind_of_its_own(tmp_path: Path, kind: str) -> None:
    """A designed 1-D or 3-D convolution runs under onnxruntime at the output size its settings give, its MACs are
    those the graph's facts count, a neighbour of a depthwise one stays depthwise, and detection makes it a kernel of
    its own kind, never in the blocked layout (onnxruntime blocks 2-D maps only)."""
    rng = random.Random(11)
    ran = drawn_and_run(kind, rng, 8, tmp_path)
    assert {kernel.settings["depthwise"] for kernel, _, _ in ran} == {0, 1}
    for kernel, path, y in ran:
        s = kernel.settings
        axes = ([(s["length"], s["kernel"], s["stride"])] if kind == "conv1d" else
                [(s["frames"], s["kt"], s["tstride"])] + [(s["hw"], s["kernel"], s["stride"])] * 2)
        assert y.shape == (1, s["cout"], *(out_size(*axis) for axis in axes))
        assert macs(kernel) == sum(node["macs"] for node in node_facts(path)) > 0
        [found] = detect(Graph.load(path), load_rules("onnxruntime"))
        assert found.kind == OTHER_RANK_CONV[len(axes)] and found.features["blocked"] == 0.0
        if s["depthwise"]:
            moved = near(kernel, rng, "moved")
            assert moved.settings["depthwise"] == 0 or moved.settings["cout"] == moved.settings["cin"]


@pytest.mark.parametrize("engine", ["onnxruntime", "ncnn"])
def test_a_probe_graphs_kernels_read_what_a_node_just_wrote_and_write_no_graph_output(tmp_path: Path,
                                                                                     engine: str) -> None:
    """As in a model: every kernel input is written by the pack's warm node just before it (for ncnn, a 4-D one by a
    depthwise convolution, in a convolution's layout, but before an activation it would run inside itself), every
    kernel output is read by a sink of its own, and the graph's inputs and outputs are the pack's (overhead nodes
    aside)."""
    members = pack(sample(44, seed=3))[0]
    graph = onnx.load(str(write_probe(members, 7, tmp_path, engine))).graph
    producers = {out: node for node in graph.node for out in node.output}
    readers: dict[str, list[str]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node.name)
    pack_owned = [v.name for v in [*graph.input, *graph.output] if not v.name.startswith("k")]
    assert len(pack_owned) == len(graph.input) + len(graph.output)
    convs = 0
    for kernel in members:
        own = onnx.load(str(tmp_path / f"{kernel.name}.onnx")).graph  # its own graph: its inputs, its outputs
        for value in own.input:
            rank = len(value.type.tensor_type.shape.dim)
            by_conv = engine == "ncnn" and rank == 4 and kernel.kind not in CONV_FUSED
            assert producers[value.name].name.startswith("p007w")
            assert producers[value.name].op_type == ("Conv" if by_conv else "Abs")
            convs += by_conv
        for value in own.output:
            assert [name.split("/")[0].startswith("p007s") for name in readers[value.name]] == [True]
    assert (convs > 0) == (engine == "ncnn")


def test_adaptive_rounds_go_where_the_line_misses() -> None:
    drawn = MIN_FIT * (len(KINDS) - 1 + CONV_WEIGHT)  # every kind MIN_FIT times: each has a line to miss
    kernels = sample(drawn, seed=4)
    rng = np.random.default_rng(0)
    times = {k.name: macs(k) * 1e-6 * (float(np.exp(rng.normal(0, 1.0))) if k.kind == "concat" else 1.0)
             for k in kernels}
    spread = spreads(kernels, times)
    assert max(spread, key=spread.__getitem__) == "concat"
    chosen = next_round(kernels, times, 40, seed=1, start=drawn)
    counts = Counter(k.kind for k in chosen)
    assert counts.most_common(1)[0][0] == "concat" and len(chosen) == 40
    assert len({k.name for k in chosen} | {k.name for k in kernels}) == drawn + 40


def test_the_zoo_models_repeats_spread_over_the_budget_left() -> None:
    """Three repeats with 600 s left: one now, the others 200 s and 400 s on, so that a slow spell of the machine
    (seconds to a minute) slows one of them, not all three; the adaptive rounds leave room for those still to run."""
    zoo = ZooRepeats.spread(["a", "b"], [1_000_000, 3_000_000], 3, now_s=100.0, left_s=600.0)
    assert zoo.due_s == [100.0, 300.0, 500.0]
    costs = Costs(graph_run_s=1.0, fixed_s=2.0, ms_per_mac=1e-6, calls=100, repeats=3)
    one = costs.models_s([1_000_000, 3_000_000]) / 3  # a repeat of both models: 2 × 2 s + 400 ms of calls
    assert one == pytest.approx(4.4) and zoo.reserve_s(costs) == pytest.approx(3 * one)
    zoo.due_s.pop(0)
    assert zoo.reserve_s(costs) == pytest.approx(2 * one)


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = tmp_path_factory.mktemp("probe")
    began = time.monotonic()
    assert main(["probe", *PROBE_ARGS, "--results-dir", str(results)]) == 0
    assert time.monotonic() - began < 2 * BUDGET_S  # the stratified round runs whatever the budget; load slows it
    return results


def test_a_probe_writes_a_table_the_devices_command_lists(probed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["devices", "--json", "--results-dir", str(probed)]) == 0
    listed = json.loads(capsys.readouterr().out)["kernel_tables"]
    assert [(t["name"], t["device"], t["engine"], t["threads"], t["precision"]) for t in listed] == [
        ("host-onnxruntime-1t-fp32", "host", "onnxruntime", 1, "fp32")]
    table = find_kernel_table("host-onnxruntime-1t-fp32", probed)
    assert table is not None
    # the designed kernels' session, then the zoo models' three repeats, a session each
    assert 0 < table.meta["probing_s"] < 2 * BUDGET_S and len(table.meta["sessions"]) == 4
    assert all((probed / session / "runs.jsonl").is_file() for session in table.meta["sessions"])
    rows = table.rows()
    zoo = rows[rows["source"] == "zoo"]
    assert set(zoo["model"]) == {"resnet8_cifar10", "kws_dscnn"}
    assert set(zoo["family"]) == {"resnet8_cifar10", "kws_dscnn"} and (zoo["model_latency_ms"] > 0).all()
    assert zoo.loc[zoo["op_type"] == "Conv", "mean_ms"].gt(0).all()
    repeats = [session_rows(per_op_tables(probed / session), {}) for session in table.meta["sessions"][1:]]
    assert [len(r) for r in repeats] == [len(zoo)] * 3  # each repeat one run of each model, every node
    for model, own in zoo.groupby("model"):
        each = [r[r["model"] == model] for r in repeats]
        convs = own[own["op_type"].eq("Conv")].set_index("node")["mean_ms"]
        # each node at the median of its three repeats (matched by name), the latency at the median of theirs
        assert convs.to_numpy() == pytest.approx(np.median(
            [r.set_index("node")["mean_ms"].reindex(convs.index).to_numpy() for r in each], axis=0))
        latencies = [r["model_latency_ms"].iloc[0] for r in each]
        assert own["model_latency_ms"].iloc[0] == pytest.approx(np.median(latencies))
    for graph in set(zoo["graph"]):  # the zoo graphs travel in the table: it predicts where the zoo is not
        assert onnx.load(str(table.graph_path(graph))).graph.node


def test_designed_rows_map_back_to_their_kernels(probed: Path) -> None:
    table = find_kernel_table("host-onnxruntime-1t-fp32", probed)
    assert table is not None
    rows = table.rows()
    designed = rows[(rows["source"] == "designed") & ~rows["op_type"].str.startswith("(")]
    assert designed["kernel"].notna().all()  # every engine row of a probe graph belongs to one kernel
    kernels = designed[~designed["kernel_kind"].isin(PACK_KINDS)]
    assert kernels["kernel"].nunique() == 12
    assert {"warm", "sink"} <= set(designed["kernel_kind"])  # the pack's own nodes are no kernel's
    for row in kernels.itertuples():
        graph = onnx.load(str(table.graph_path(row.graph)))
        names = {node.name for node in graph.graph.node}
        assert isinstance(row.onnx_node, float) or row.onnx_node in names  # joined rows name a node of its graph
    times = kernel_times(rows)
    # a small kernel can come out at zero on a loaded machine, where its pack's overhead nodes ran slow
    assert len(times) == 12 and (times >= 0).all() and (times > 0).sum() >= 9
    overhead = designed[designed["kernel_kind"] == OVERHEAD]["mean_ms"]
    assert len(overhead) == 3 * rows.loc[rows["source"] == "designed", "model"].nunique()
    assert overhead.median() < kernels.groupby("kernel")["mean_ms"].sum().median()
    samples = samples_of(rows, graph_resolver(table), load_rules("onnxruntime"))
    carried = np.array([x[-1] for x in samples["x"]])  # the input footprint
    assert samples["alone"].any() and (carried[samples["alone"].to_numpy()] == 0).all()  # timed alone: none
    assert samples.loc[carried > 0, "model"].value_counts().to_dict() == {"resnet8_cifar10": 1, "kws_dscnn": 1}



def test_a_probes_designed_kernels_teach_the_layouts_they_ran(probed: Path) -> None:
    """Rules learned from a probe's designed kernels alone (`python -m harness.kernels.learn ... KERNEL_TABLE`) find
    this host's layout block, and detect each designed convolution in the layout the engine ran it in."""
    table = find_kernel_table("host-onnxruntime-1t-fp32", probed)
    assert table is not None
    examples = examples_from_table(table.path)
    rows = table.rows()
    kernels = rows[(rows["source"] == "designed") & ~rows["kernel_kind"].isin(PACK_KINDS) & rows["kernel"].notna()]
    assert {example.model for example in examples} == set(kernels["graph"])  # no pack's own rows
    rules = learn([], "onnxruntime", examples)
    assert rules.block == host_block("onnxruntime") and rules.conv_layout
    checked = 0
    for example in examples:
        anchors = {example.graph.nodes[k.nodes[0]]["name"]: k.features["blocked"] for k in detect(example.graph, rules)
                   if k.kind in ("Conv", "DepthwiseConv", "GroupedConv")}
        for row in example.rows.itertuples():
            if row.onnx_node in anchors:
                assert anchors[row.onnx_node] == float(str(row.node).endswith(BLOCKED_MARK)), (example.model, row.node)
                checked += 1
    assert checked >= 2


NCNN_MODELS = ("resnet8_cifar10", "kws_dscnn")


def test_an_ncnn_probe_maps_its_layers_back_to_the_kernels(tmp_path: Path) -> None:
    """ncnn's per-op rows are its layers (named by pnnx, with no shapes): each maps back through the converted
    .param's blobs to the probe graph's input it reads, and the pack's own layers to the pack. Its 26 kernels reach
    past the first permute and hold no einsum, which ncnn cannot load (one had failed its whole probe graph)."""
    pytest.importorskip("ncnn")
    assert main(["probe", "--runtime", "ncnn", "--models", *NCNN_MODELS, "--designed", "26", "--budget-min", "2",
                 "--cpus", "1", "--backend", "local", "--results-dir", str(tmp_path)]) == 0
    table = find_kernel_table("host-ncnn-1t-fp32", tmp_path)
    assert table is not None and table.meta["engine"] == "ncnn"
    rows = table.rows()
    layers = rows[(rows["source"] == "designed") & ~rows["op_type"].str.startswith("(")]
    assert layers["kernel"].notna().all()
    assert set(layers["kernel_kind"]) >= {"conv", "gemm", "relu", "relu6", "hardswish", "sigmoid", "overhead"}
    assert set(layers["op_type"]) >= {"Convolution", "ReLU", "Pooling"}
    # the pack's own layers: the Abs writing each kernel input, the ReduceMean reading each kernel output
    assert set(layers.loc[layers["op_type"].eq("UnaryOp"), "kernel_kind"]) == {"warm"}
    assert set(layers.loc[layers["op_type"].eq("Reduction"), "kernel_kind"]) == {"sink"}
    assert (kernel_times(rows) > 0).sum() >= 23 and len(kernel_times(rows)) == 26  # a few at the profiler's own cost
    assert "permute" in set(layers["kernel_kind"]) and "einsum" not in set(layers["kernel_kind"])
    # the zoo models' weighted layers join their graph's convolutions and Gemm by order and channels; each trains
    # its kernel (with the activation ncnn ran inside it), and the models' latency calibrates the term
    rules, joins = engine_evidence("ncnn", rows, graph_resolver(table))
    assert rules.absorb[("Relu", "Conv", True, True)]["absorbed"] > 0  # ResNet-8's `convrelu` layers
    # trained at their time in the whole run: each graph's layers sum to its latency where they summed to more
    timed = rows[~rows["op_type"].str.startswith("(")]
    raw, latency = timed.groupby("model")["median_ms"].sum(), timed.groupby("model")["model_latency_ms"].first()
    scaled = in_run(timed).groupby("model")["median_ms"].sum()
    assert np.allclose(scaled, np.minimum(raw, latency), rtol=1e-9) and len(scaled) == len(raw) > 2
    samples = samples_of(rows, graph_resolver(table), rules, joins)
    for name in NCNN_MODELS:
        graph = Graph.load(graph_resolver(table)(f"{GRAPHS_DIR}/{name}.onnx"))
        assert len(joins[f"{GRAPHS_DIR}/{name}.onnx"]) == len(weighted_nodes(graph))
        assert (samples["model"] == name).sum() == len(weighted_nodes(graph))
    resnet8 = graph_resolver(table)(f"{GRAPHS_DIR}/resnet8_cifar10.onnx")
    param = param_text(convert(resnet8, content_sha256(resnet8), resnet8.stem, onnx_facts(resnet8)["inputs"]).param)
    assert layer_join(Graph.load(resnet8), param).keys() == joins[f"{GRAPHS_DIR}/resnet8_cifar10.onnx"].keys()
    assert layer_join(Graph.load(resnet8), param.replace(" 0=16 ", " 0=17 ", 1)) == {}  # channels disagree: no join
    model = fitted_model(table)
    assert model.models == len(end_to_end(rows)) == len(NCNN_MODELS)  # under LINE_MODELS: the median ratio
    assert model.term[0] > 0 and model.term[1] == 0 and model.power == 1.0
    detail = model.predict(graph_resolver(table)(f"{GRAPHS_DIR}/kws_dscnn.onnx"))[3]
    assert detail["calibration_models"] == 2


def test_designed_chains_teach_ncnn_what_it_ran_as_one_layer(tmp_path: Path) -> None:
    """pnnx makes a designed channel shuffle (Reshape, Transpose, Reshape) one ShuffleChannel layer: its one timed
    row absorbs the chain into its first node, and the rules then group ShuffleNetV2's shuffles as ncnn runs them (a
    family held out of the table has no model of its own to show it). A chain timed one layer per node absorbs
    nothing; a row count of neither, a tool's whole-graph time (no median) or a pack's warm-up says nothing."""
    pytest.importorskip("ncnn")
    shuffle = Kernel("k0000_shuffle", "shuffle", (("c", 48), ("groups", 2), ("hw", 14)))
    path = tmp_path / GRAPHS_DIR / f"{shuffle.name}.onnx"
    path.parent.mkdir()
    onnx.save(kernel_model(shuffle), path)
    param = param_text(convert(path, content_sha256(path), path.stem, onnx_facts(path)["inputs"]).param)
    ran = [line[0] for line in layers(param) if line[0] != "Input"]
    assert ran == ["ShuffleChannel"]
    graph_name = f"{GRAPHS_DIR}/{path.name}"

    def timed(op_types: list[str], kernel: str = shuffle.name, ms: float = 0.02) -> pd.DataFrame:
        return pd.DataFrame({"source": "designed", "kernel": kernel, "graph": graph_name, "op_type": op_types,
                             "median_ms": ms, "mean_ms": ms})

    def rules_of(rows: pd.DataFrame) -> Rules:
        return Rules("ncnn", tally(designed_absorption(rows, lambda name: tmp_path / name)))

    one = rules_of(timed(ran))
    assert {key: entry["absorbed"] for key, entry in one.absorb.items() if entry["absorbed"]} == {
        ("Transpose", "Reshape", True, True): 1, ("Reshape", "Reshape", True, True): 1}
    assert [len(kernel.nodes) for kernel in detect(Graph.load(path), one)] == [3]
    assert len(whole_kernel(Graph.load(path), timed(ran), one)) == 1  # the designed shuffle now trains
    shufflenet = Graph.load(resolve_model("shufflenet_v2_x0_5", check_runtime=False).path)
    grouped = [[shufflenet.nodes[i]["op_type"] for i in kernel.nodes] for kernel in detect(shufflenet, one)]
    assert grouped.count(["Reshape", "Transpose", "Reshape"]) == 16  # as the 16 ShuffleChannel layers of its .param
    assert not any(kinds[0] == "Transpose" for kinds in grouped)
    per_node = rules_of(timed(["Reshape", "Permute", "Reshape"]))
    assert per_node.absorb and all(entry["absorbed"] == 0 for entry in per_node.absorb.values())
    assert len(detect(shufflenet, per_node)) > len(detect(shufflenet, one))
    for says_nothing in (timed(["Reshape", "Permute"]), timed(ran, ms=math.nan), timed(ran, kernel="p000w0001_warm")):
        assert rules_of(says_nothing).absorb == {}


def test_a_probe_on_a_loopback_board_writes_the_boards_table(board_factory: BoardFactory, tmp_path: Path) -> None:
    """TARGET: the probe's sessions run on a real SSH board (a container on loopback, set up from nothing), and the
    table is the board's, named after its host name."""
    board = board_factory.start("x86-bare", cpus=1, memory="1g")
    set_up(board, tmp_path)
    harness(board.config, tmp_path, "probe", "--target", board.url, "--models", "resnet8_cifar10", "--designed", "12",
            "--budget-min", "1.5", "--memory", "512m")
    listed = json.loads(harness(board.config, tmp_path, "devices", "--json").stdout)["kernel_tables"]
    name = f"{board.name}-onnxruntime-1t-fp32"
    assert [(t["name"], t["device"], t["engine"]) for t in listed] == [(name, board.name, "onnxruntime")]
    table = find_kernel_table(name, tmp_path / "results")
    assert table is not None and board.url in table.meta["source"]
    rows = table.rows()
    designed = rows[(rows["source"] == "designed") & ~rows["op_type"].str.startswith("(")]
    assert designed["kernel"].notna().all() and (kernel_times(rows) > 0).sum() >= 9
    assert set(rows.loc[rows["source"] == "zoo", "model"]) == {"resnet8_cifar10"}


def test_probe_refuses_what_it_cannot_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--budget-min", "0", "--results-dir", str(tmp_path)]) != 0
    assert "--budget-min 0" in capsys.readouterr().err
    assert main(["probe", "--runtime", "litert", "--results-dir", str(tmp_path)]) != 0
    err = capsys.readouterr().err
    assert "probe export --engine litert" in err and "Traceback" not in err
    assert main(["probe", "--cpus", "1", "--models", "resnet8", "--results-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("harness: error: --models: 'resnet8' is not a zoo model name") == 1 and "Traceback" not in err
    assert "probing this host" not in err  # the one line: no heading of a probe that never starts
    assert not any(tmp_path.glob("*/runs.jsonl"))  # refused before any session ran: nothing measured, nothing lost
