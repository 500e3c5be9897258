"""Kernel detection against the engine: zoo models profiled per-op for real under onnxruntime, and the kernels
detected from each graph by the stored fusion rules (harness/kernels/fusion_rules_onnxruntime.json, learned from
other sessions) must match the engine's rows one to one, in kind and in count: the fused convolutions, the
layout conversions onnxruntime inserts (ReorderInput, ReorderOutput), pooling, concat and the rest."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from harness.cli import main
from harness.kernels.detect import absorbs, detect, kernels_of
from harness.kernels.graph import Graph
from harness.kernels.learn import Example, learn
from harness.kernels.training import ModelTable, row_kind, session_tables
from harness.store.results import list_sessions
from tests.zoo_support import zoo_cache  # noqa: F401 - fixture

MODELS = ("shufflenet_v2_x0_5", "squeezenet1_1", "resnet8_cifar10")
"""Layout conversions around channel shuffles (ShuffleNetV2: Split, Transpose, Reshape), concat of aligned channels
that stays in the blocked layout (SqueezeNet), residual Add and Relu fused into the convolution (ResNet-8)."""


@pytest.mark.usefixtures("zoo_cache")
def test_detected_kernels_match_the_engine_rows(tmp_path: Path) -> None:
    assert main(["profile", *MODELS, "--per-op", "--repeats", "1", "--iterations", "10", "--warmup", "2",
                 "--cpus", "1", "--backend", "local", "--results-dir", str(tmp_path), "--no-report"]) == 0
    tables = session_tables(list_sessions(tmp_path)[-1:], "onnxruntime")
    assert sorted(table.model for table in tables) == sorted(MODELS)
    for table in tables:
        graph = Graph.load(table.model_path)
        engine = Counter(row_kind(graph, row) for row in table.rows.itertuples())
        detected = Counter(kernel.kind for kernel in kernels_of(table.model_path, "onnxruntime"))
        assert detected == engine, f"{table.model}: detected {dict(detected)}, engine ran {dict(engine)}"
        assert sum(engine.values()) > 10
    inserted = sum(Counter(k.kind for k in kernels_of(t.model_path, "onnxruntime"))["ReorderInput"] for t in tables)
    assert inserted > 0  # the layout conversions are among what was matched
    check_learning(tables)


def check_learning(tables: list[ModelTable]) -> None:
    """Rules learned from these three profiles alone give their own rows back: the Conv+Relu and Conv+Add+Relu
    absorptions, the 8-channel block of this host's NCHWc layout, and every conversion counted."""
    rules = learn([Example(t.model, Graph.load(t.model_path), t.rows) for t in tables], "onnxruntime")
    assert rules.block == 8 and rules.meta["inserted_count_error"] == 0
    assert absorbs(rules, "Relu", "Conv", True, True) and absorbs(rules, "Add", "Conv", True, False)
    for table in tables:
        graph = Graph.load(table.model_path)
        engine = Counter(row_kind(graph, row) for row in table.rows.itertuples())
        assert Counter(kernel.kind for kernel in detect(graph, rules)) == engine, table.model
