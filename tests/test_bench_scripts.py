"""The framework bench scripts run real models under the harness, and missing runtimes fail up front."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from harness.cli import main
from harness.models import resolve as models
from tests.helpers import profile_json, session_runs

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="PyTorch not installed (make setup-zoo installs it)")
BUILDER = """
import torch

def build():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten(), torch.nn.Linear(8, 10))
    return model, (torch.randn(1, 3, 32, 32),)
"""


@pytest.fixture(scope="module")
def torch_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import torch

    root = tmp_path_factory.mktemp("torch")
    builder = root / "convnet.py"
    builder.write_text(BUILDER)
    namespace: dict = {}
    exec(compile(BUILDER, str(builder), "exec"), namespace)
    model, example = namespace["build"]()
    torch.export.save(torch.export.export(model.eval(), example), root / "convnet.pt2")
    torch.jit.save(torch.jit.script(model.eval()), root / "convnet_ts.pt")
    return {"py": builder, "pt2": root / "convnet.pt2", "pt": root / "convnet_ts.pt"}


@needs_torch
@pytest.mark.parametrize(("kind", "extra"), [("py", ()), ("pt2", ()), ("pt", ("--", "--shape", "x=1x3x32x32"))])
def test_torch_bench_runs(capsys, in_tmp_cwd: Path, torch_models: dict[str, Path], kind: str,
                          extra: tuple[str, ...]) -> None:
    results = in_tmp_cwd / "results"
    profile_json(capsys, results, str(torch_models[kind]), "--backend", "local", "--repeats", "1",
                 "--iterations", "30", "--batch-size", "2", *extra)
    run = session_runs(results)[0]
    assert run["status"] == "ok", run["stderr_tail"]
    assert run["latency_stats_ms"]["n"] == 30 and run["metrics"]["threads"] == 1
    assert run["batch_size"] == (1 if kind == "pt2" else 2)  # an ExportedProgram keeps its example's shapes
    assert run["load_s"] > 0 and run["model_kind"] == "torch"


def test_missing_runtime_says_what_to_install(capsys, in_tmp_cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # LiteRT is a dev dependency, so make the .tflite kind need a module that cannot be installed
    kind, script, _, _ = models.KINDS[".tflite"]
    monkeypatch.setitem(models.KINDS, ".tflite", (kind, script, "harness_absent_runtime", "it: pip install absent"))
    (in_tmp_cwd / "m.tflite").write_bytes(b"TFL3")
    capsys.readouterr()
    assert main(["profile", "m.tflite", "--backend", "local"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert "harness_absent_runtime" in err and "pip install absent" in err
    assert not (in_tmp_cwd / "results").exists()  # stopped before any session was started


def test_dynamic_dimension_sized_by_a_script_argument(capsys, in_tmp_cwd: Path) -> None:
    """`-- --dim seq=16`, how a size was given before DIMS, still sizes it (and is recorded as DIMS would be); without
    any size the session stops before its first run (tests/test_inputs.py)."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, in_tmp_cwd / "seq.onnx")
    results = in_tmp_cwd / "results"
    capsys.readouterr()
    assert main(["profile", "seq.onnx", "--backend", "local", "--repeats", "1", "--results-dir", str(results)]) == 2
    assert 'set DIMS="seq=N"' in capsys.readouterr().err and not results.exists()
    profile_json(capsys, results, "seq.onnx", "--backend", "local", "--repeats", "1", "--", "--dim", "seq=16")
    run = session_runs(results)[0]
    assert run["status"] == "ok" and run["conditions"]["dims"] == "seq=16"
