"""`harness probe --for`: designed kernels at a user's graph's own configurations, built as the graph runs them and
probed beside the sampled ones, with the table saying which model each was probed for."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import onnx
import pandas as pd
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.cli import main
from harness.kernels.designed import Kernel, macs
from harness.kernels.designed_for import graph_configs, kernels_for
from harness.kernels.designed_graphs import kernel_model
from harness.kernels.graph import Graph
from harness.kernels.predictor import (
    LoadedGraph,
    engine_evidence,
    fitted_model,
    graph_resolver,
    samples_of,
    without_profiler,
)
from harness.kernels.probed import kernel_times
from harness.kernels.regressors import (
    TWINS,
    KernelRegressors,
    Twins,
    twin_curve,
    twin_key,
)
from harness.kernels.rules import load_rules
from harness.kernels.table import GRAPHS_DIR, find_kernel_table
from harness.models.resolve import resolve_model
from tests.test_kernels_predict import conv, samples_frame


def zoo_graph(name: str) -> Path:
    return resolve_model(name, check_runtime=False).path


def test_each_convolution_and_dense_layer_of_a_graph_becomes_a_designed_kernel_built_as_it_runs(
        tmp_path: Path) -> None:
    """The keyword spotter's convolutions (a 10×4 stem over 49×10 MFCC frames, depthwise 3×3 and pointwise over 25×5)
    and its classifier, each once: a designed kernel's input, weight, output and MACs are the graph node's, its
    padding too where the graph's is not taps // 2 (the stem pads its 4 columns' taps by 1, making 5 output columns,
    not 6)."""
    graph = Graph.load(zoo_graph("kws_dscnn"))
    configs = graph_configs(zoo_graph("kws_dscnn"))
    assert [kind for kind, _ in configs] == ["conv", "conv", "conv", "gemm"]
    assert dict(configs[0][1]) == {"cin": 1, "cout": 64, "groups": 1, "hw": 49, "w": 10, "kernel": 10, "kw": 4,
                                   "pw": 1, "stride": 2}
    by_shapes = {(str(n["input_shapes"][0]), str(n["input_shapes"][1])): n for n in graph.nodes
                 if n["op_type"] == "Conv"}
    for i, (kind, config) in enumerate(configs[:3]):
        kernel = Kernel(f"k{i:04d}_conv", kind, config)
        path = tmp_path / f"{kernel.name}.onnx"
        onnx.save(kernel_model(kernel), str(path))
        built = next(n for n in Graph.load(path).nodes if n["op_type"] == "Conv")
        node = by_shapes[(str(built["input_shapes"][0]), str(built["input_shapes"][1]))]
        assert built["output_shapes"] == node["output_shapes"]
        assert built["macs"] == macs(kernel) == node["macs"]
    assert len(by_shapes) == 3  # every convolution of the graph is one of the three
    dense = dict(configs[3][1])
    classifier = next(n for n in graph.nodes if n["op_type"] == "Gemm")
    assert dense["rows"] == 1 and dense["cin"] * dense["cout"] == classifier["macs"]


def test_a_convolution_padded_otherwise_is_built_at_its_padding_and_one_strided_otherwise_is_left_out(
        tmp_path: Path) -> None:
    """A 3×3 convolution with no padding (28 -> 26) is designed at pads 0 and built to the graph's output; one whose
    rows and columns step apart (strides 2, 1) has no designed stand-in."""
    weight = numpy_helper.from_array(np.ones((8, 4, 3, 3), dtype=np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["valid"], kernel_shape=[3, 3], pads=[0, 0, 0, 0]),
             helper.make_node("Conv", ["x", "w"], ["strided"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 1])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 28, 28])],
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
                               for name in ("valid", "strided")], [weight])
    path = tmp_path / "mine.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    [(kind, config)] = graph_configs(path)
    assert dict(config) == {"cin": 4, "cout": 8, "groups": 1, "hw": 28, "kernel": 3, "ph": 0, "pw": 0, "stride": 1}
    built = tmp_path / "built.onnx"
    onnx.save(kernel_model(Kernel("k0000_conv", kind, config)), str(built))
    conv_node = next(n for n in Graph.load(built).nodes if n["op_type"] == "Conv")
    assert conv_node["output_shapes"] == [[1, 8, 26, 26]] and conv_node["macs"] == 26 * 26 * 8 * 4 * 9


def test_configurations_shared_by_graphs_are_probed_once_and_named_for_each() -> None:
    kernels, names = kernels_for({"mine": zoo_graph("kws_dscnn"), "again": zoo_graph("kws_dscnn"),
                                  "resnet": zoo_graph("resnet8_cifar10")}, 40)
    assert names["mine"] == names["again"] == ["k0040_conv", "k0041_conv", "k0042_conv", "k0043_gemm"]
    assert [k.name for k in kernels] == [f"k{40 + i:04d}_{k.kind}" for i, k in enumerate(kernels)]
    assert len(kernels) == len({(k.kind, k.config) for k in kernels}) == 4 + len(set(names["resnet"]))
    assert not set(names["mine"]) & set(names["resnet"])


def test_a_twin_is_the_same_configuration_with_or_without_a_bias(tmp_path: Path) -> None:
    """A designed convolution has a bias; ResNet-18's convolutions, their batch norm left to the engine, have none:
    the same configuration to a twin, though their bytes differ. Another stride is not."""
    rules = load_rules("onnxruntime")
    kernel = Kernel("k0000_conv", "conv", (("cin", 64), ("cout", 64), ("groups", 1), ("hw", 56), ("kernel", 3),
                                           ("stride", 1)))
    with_bias = kernel_model(kernel)
    without = onnx.ModelProto()
    without.CopyFrom(with_bias)
    conv = next(node for node in without.graph.node if node.op_type == "Conv")
    del conv.input[2]
    strided = kernel_model(Kernel("k0000_conv", "conv", tuple(sorted({**kernel.settings, "stride": 2}.items()))))
    vectors = []
    for i, model in enumerate((with_bias, without, strided)):
        onnx.save(model, str(tmp_path / f"{i}.onnx"))
        loaded = LoadedGraph.of(Graph.load(tmp_path / f"{i}.onnx"), rules)
        (kind, x), = [(kind, x) for kind, x in loaded.by_kind.items() if "Conv" in kind]
        vectors.append((kind, x[0]))
    (kind, biased), (_, plain), (_, other) = vectors
    assert not np.array_equal(biased, plain) and twin_key(kind, biased) == twin_key(kind, plain)
    assert twin_key(kind, other) != twin_key(kind, plain)


def test_a_kernel_with_a_twin_is_its_twins_time_less_what_a_model_takes_off_twins() -> None:
    """Models of three families run their convolutions at 0.8 of the time of the designed kernels at the same
    configurations (their twins, each timed twice, 10% under and over): a graph's convolution with a twin is predicted
    at what the models ran it in, whatever the regressors say; one with none, by the regressors."""
    rng = np.random.default_rng(3)
    configs = [(int(c), int(s)) for c, s in zip(rng.choice([24, 40, 72, 120], 60), rng.choice([7, 14, 28], 60),
                                                   strict=True)]
    def ms(c: int, s: int) -> float:
        return 1e-7 * 9 * c * c * s * s + 0.003 * (1 + (c * s) % 5)  # a time per configuration no line follows
    designed = samples_frame("Conv", [[*conv(c, c, 1, s), 0.0] for c, s in configs * 2],
                             [ms(c, s) * f for f in (0.9, 1.1) for c, s in configs], True, "designed")
    models = samples_frame("Conv", [[*conv(c, c, 1, s), 0.0] for c, s in configs],
                           [0.8 * ms(c, s) for c, s in configs], False, [f"f{i % 3}" for i in range(60)])
    samples = pd.concat([models, designed], ignore_index=True)
    regressors = KernelRegressors.fit(samples)
    assert regressors.twins.log_factor == pytest.approx(math.log(0.8 / math.sqrt(0.9 * 1.1)))  # to the twins' median
    assert regressors.twins.curve is None  # one ratio at every size: no curve predicts a held-out family better
    c, s = configs[0]
    times, carried = regressors.predict("Conv", np.array([[*conv(c, c, 1, s), 5.0]]), 10.0)
    assert carried == TWINS and times[0] == pytest.approx(0.8 * ms(c, s))
    unseen = np.array([[*conv(96, 96, 1, 14), 0.0]])
    assert regressors.predict("Conv", unseen, 10.0) == regressors.regressed("Conv", unseen, 10.0)
    assert KernelRegressors.fit(samples, twins=False).predict("Conv", np.array([[*conv(c, c, 1, s), 5.0]]), 10.0)[
        1] == "Conv"  # an engine whose rows join node by node (onnxruntime) reads no twins


def test_where_models_run_small_kernels_faster_than_their_twins_and_large_ones_slower_the_factor_is_a_curve() -> None:
    """Three families run kernels of under 0.1 ms at 0.75 of their twins' time and those over at 1.2 (as on one ncnn
    probe): a flat factor misses every held-out family's large kernels, so the curve in the twin's time is taken, and
    a large kernel's twin is read at 1.2 of its time, a small one's at 0.75."""
    rng = np.random.default_rng(5)
    twin_ms = np.exp(rng.uniform(math.log(0.005), math.log(2.0), 90))
    ratios = np.log(np.where(twin_ms < 0.1, 0.75, 1.2)) + rng.normal(0, 0.03, 90)
    families = np.array([f"f{i % 3}" for i in range(90)])
    curve = twin_curve(ratios, np.log(twin_ms), families)
    assert curve is not None
    assert math.exp(np.interp(math.log(1.0), *curve)) == pytest.approx(1.2, rel=0.05)
    assert math.exp(np.interp(math.log(0.01), *curve)) == pytest.approx(0.75, rel=0.05)
    assert twin_curve(np.log(np.full(90, 0.8)) + rng.normal(0, 0.03, 90), np.log(twin_ms), families) is None


def test_a_probe_for_a_model_measures_its_configurations_beside_the_sampled_kernels(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--runtime", "ncnn", "--models", "--designed", "4", "--for", "kws_dscnn", "--budget-min", "1",
                 "--cpus", "1",
                 "--backend", "local", "--results-dir", str(tmp_path), "--json"]) == 0
    provenance = json.loads(capsys.readouterr().out)
    assert provenance["for"] == ["kws_dscnn"]
    table = find_kernel_table(provenance["name"], tmp_path)
    assert table is not None
    probed_for = table.meta["for"]["kws_dscnn"]
    assert probed_for == ["k0004_conv", "k0005_conv", "k0006_conv", "k0007_gemm"]  # after the 4 sampled, not counted
    times = kernel_times(table.rows())
    assert len(times) == 8 and set(probed_for) < set(times.index)
    assert (times[probed_for] >= 0).all() and (times[probed_for[:3]] > 0).sum() >= 2
    stem = Graph.load(table.graph_path(f"{GRAPHS_DIR}/{probed_for[0]}.onnx"))
    assert stem.nodes[0]["input_shapes"][:2] == [[1, 1, 49, 10], [64, 1, 10, 4]]
    # the table has no model: the keyword spotter's kernels with a twin come out at their twins' time as measured,
    # less the profiler's cost a row that every kernel's time is taken as (twins are read where an engine's rows
    # name no graph node: ncnn's layers)
    model = fitted_model(table)
    prediction = model.predict(zoo_graph("kws_dscnn"))[3]["by_kind"]
    rules, joins = engine_evidence("ncnn", table.rows(), graph_resolver(table))
    samples = without_profiler(samples_of(table.rows(), graph_resolver(table), rules, joins), model.profiler_ms)
    twinned = [kind for kind, part in prediction.items() if part["regressor"] == TWINS]
    assert twinned and not Twins.fit(samples, samples.iloc[:0]).log_factor
    measured = {twin_key(kind, x): ms for kind, x, ms in zip(samples["kind"], samples["x"], samples["ms"], strict=True)}
    kernels = LoadedGraph.of(Graph.load(zoo_graph("kws_dscnn")), rules).by_kind
    for kind in twinned:
        assert prediction[kind]["ms"] == pytest.approx(sum(measured[twin_key(kind, x)] for x in kernels[kind]))
    assert main(["probe", "--for", "my_net", "--results-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("harness: error: --for: 'my_net' is not a zoo model name") == 1 and "Traceback" not in err
