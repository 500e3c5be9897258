"""The zoo models edge users bring first: the four MLPerf Tiny reference models, compact BERTs (two int64 inputs
with a dynamic batch and seq) and SSDLite320 (images with dynamic height and width, raw head outputs). Each exports,
runs in onnxruntime as its seeded torch network does, and profiles through the real CLI; their facts against the
published figures are checked in tests/test_zoo_published.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness import zoo
from harness.models.facts import onnx_facts
from harness.zoo.registry import BERT_VOCAB, FAMILIES
from tests.helpers import profile_json, session_runs
from tests.zoo_support import zoo_cache  # noqa: F401  (fixture)

TINY = ["kws_dscnn", "vww_mobilenet_v1_0.25_96", "resnet8_cifar10", "ad_fc_autoencoder"]
NEW_FAMILIES = {"kws_dscnn", "vww_mobilenet_v1", "resnet8_cifar10", "ad_fc_autoencoder", "bert", "ssdlite"}
SPEC_KEYS = {"name", "family", "values", "input_shape", "num_classes", "quant"}


def test_names_inputs_and_the_older_specs_unchanged() -> None:
    assert {f.key for f in FAMILIES} >= NEW_FAMILIES
    assert [zoo.parse(n).input_shape for n in TINY] == [(1, 1, 49, 10), (1, 3, 96, 96), (1, 3, 32, 32), (1, 640)]
    assert [zoo.parse(n).num_classes for n in TINY] == [12, 2, 10, 640]
    assert not zoo.is_zoo_name("vww_mobilenet_v1_0x25_96")  # a template's dot is a dot
    bert = zoo.parse("bert_mini_int8_dynamic")
    assert (bert.base_name, bert.input_shape, bert.num_classes) == ("bert_mini", (1, 128), 256)
    assert bert.as_dict()["signature"] == {
        "inputs": [{"name": "input_ids", "dims": ["batch", "seq"], "dtype": "int64"},
                   {"name": "attention_mask", "dims": ["batch", "seq"], "dtype": "int64"}],
        "outputs": ["last_hidden_state", "pooler_output"],
        "dims": {"seq": {"default": 128, "min": None, "max": 512}},
    }
    detector = zoo.parse("ssdlite320_mobilenet_v3_large")
    assert (detector.input_shape, detector.num_classes) == ((1, 3, 320, 320), 91)
    assert detector.input_text() == "images[batch,3,height,width] float32 (height 320, width 320)"
    assert not zoo.is_zoo_name("bert_huge") and not zoo.is_zoo_name("bert_base")
    # The older families' specs, part of their exports' cache keys, keep exactly their six keys.
    for model in zoo.list_models():
        if model["family"] not in NEW_FAMILIES:
            assert set(zoo.parse(model["name"]).as_dict()) == SPEC_KEYS, model["name"]


def test_zoo_list_shows_named_inputs(capsys: pytest.CaptureFixture[str]) -> None:
    """The listing is torch-free, and a signature's [batch,seq] reaches the terminal as text, not rich markup."""
    from harness.cli import main

    assert main(["zoo", "list"]) == 0
    listing = capsys.readouterr().out
    assert "input_ids[batch,seq] int64, attention_mask[batch,seq] int64 (seq 128)" in listing
    assert "images[batch,3,height,width] float32 (height 320, width 320)" in listing
    assert "1x1x49x10" in listing and "1x640" in listing


def _run_both(name: str, feeds: dict[str, np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """onnxruntime's outputs of the export and the seeded torch network's, for the same feeds."""
    torch = pytest.importorskip("torch")
    import onnxruntime as ort

    from harness.zoo.build import build

    session = ort.InferenceSession(str(zoo.export(name)), providers=["CPUExecutionProvider"])
    got = session.run(None, feeds)
    with torch.no_grad():
        want = build(zoo.parse(name))(*(torch.from_numpy(value) for value in feeds.values()))
    want = [w.numpy() for w in (want if isinstance(want, tuple) else (want,))]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-3 * float(np.abs(w).max()))
    return got, want


@pytest.mark.usefixtures("zoo_cache")
@pytest.mark.parametrize("name", TINY)
def test_mlperf_tiny_exports_run_like_torch(name: str) -> None:
    spec = zoo.parse(name)
    x = np.random.default_rng(0).standard_normal((2, *spec.input_shape[1:])).astype(np.float32)
    (got,), _ = _run_both(name, {"input": x})
    assert got.shape == (2, spec.num_classes)
    facts = onnx_facts(zoo.export(name))
    assert facts["inputs"] == [{"name": "input", "shape": ["batch", *spec.input_shape[1:]], "dtype": "float32"}]


def _bert_feeds(rng: np.random.Generator, batch: int, seq: int) -> dict[str, np.ndarray]:
    """Token ids below the vocabulary, and a mask with padding at the end of all but the first sequence."""
    mask = np.ones((batch, seq), dtype=np.int64)
    for row in range(1, batch):
        mask[row, seq - row * 3:] = 0
    return {"input_ids": rng.integers(0, BERT_VOCAB, (batch, seq), dtype=np.int64), "attention_mask": mask}


@pytest.mark.usefixtures("zoo_cache")
@pytest.mark.parametrize("name", ["bert_tiny", pytest.param("bert_mini", marks=pytest.mark.slow)])
def test_bert_exports_with_dynamic_batch_and_seq(name: str) -> None:
    import onnx

    spec = zoo.parse(name)
    path = zoo.export(name)
    graph = onnx.load(str(path)).graph
    assert [(i["name"], i["shape"], i["dtype"]) for i in onnx_facts(path)["inputs"]] == [
        ("input_ids", ["batch", "seq"], "int64"), ("attention_mask", ["batch", "seq"], "int64")]
    assert [o.name for o in graph.output] == ["last_hidden_state", "pooler_output"]
    assert {"MatMul", "Softmax", "LayerNormalization", "Gather"} <= {node.op_type for node in graph.node}
    rng = np.random.default_rng(0)
    for batch, seq in ((2, 16), (3, 40)):  # neither the example's batch 2 nor its seq 128: both dims are dynamic
        (hidden, pooled), _ = _run_both(name, _bert_feeds(rng, batch, seq))
        assert hidden.shape == (batch, seq, spec.num_classes) and pooled.shape == (batch, spec.num_classes)


@pytest.mark.usefixtures("zoo_cache")
@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:FutureWarning")
def test_bert_torchscript_and_dynamic_int8_run() -> None:
    torch = pytest.importorskip("torch")
    import onnxruntime as ort

    feeds = _bert_feeds(np.random.default_rng(1), 1, 128)
    scripted = torch.jit.load(str(zoo.export("bert_tiny", "torchscript")))
    with torch.no_grad():
        want = scripted(*(torch.from_numpy(v) for v in feeds.values()))[0].numpy()
    got = ort.InferenceSession(str(zoo.export("bert_tiny")), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
    quantized = ort.InferenceSession(str(zoo.export("bert_tiny_int8_dynamic")), providers=["CPUExecutionProvider"])
    assert [i.shape for i in quantized.get_inputs()] == [["batch", "seq"], ["batch", "seq"]]
    assert quantized.run(None, feeds)[0].shape == (1, 128, 128)
    with pytest.raises(Exception, match="calibrates float inputs only, use --mode dynamic"):
        zoo.export("bert_tiny_int8_static")


@pytest.mark.slow
@pytest.mark.usefixtures("zoo_cache")
def test_ssdlite_exports_with_dynamic_height_and_width() -> None:
    path = zoo.export("ssdlite320_mobilenet_v3_large")
    assert onnx_facts(path)["inputs"] == [{"name": "images", "shape": ["batch", 3, "height", "width"],
                                           "dtype": "float32"}]
    rng = np.random.default_rng(0)
    for shape, anchors in (((1, 3, 320, 320), 3234), ((2, 3, 256, 384), 3078)):
        (boxes, scores), _ = _run_both("ssdlite320_mobilenet_v3_large",
                                       {"images": rng.standard_normal(shape).astype(np.float32)})
        assert boxes.shape == (shape[0], anchors, 4) and scores.shape == (shape[0], anchors, 91)


@pytest.mark.usefixtures("zoo_cache")
def test_tiny_models_and_bert_profile(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The four MLPerf Tiny models as they are; BERT with its seq given to the bench script (-- --dim seq=N)."""
    pytest.importorskip("torchvision")
    names = [*TINY, "bert_tiny"]
    profile_json(capsys, tmp_path, *names, "--backend", "local", "--repeats", "1", "--iterations", "3",
                 "--warmup", "1", "--", "--dim", "seq=32")
    runs = session_runs(tmp_path)
    assert sorted(r["model_name"] for r in runs) == sorted(names)
    for run in runs:
        assert run["status"] == "ok", (run["model_name"], run.get("stderr_tail"))
        assert run["latency_stats_ms"]["n"] == 3
