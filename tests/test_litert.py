"""RUNTIME=litert: real onnx2tf conversions (in the converter's own venv) and real LiteRT runs in real cgroups, on
small models (nb201 builds ONNX without torch; the others are built here with onnx.helper). Each model is converted
once for the module: about 40 s of conversions in all."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from harness.cli import main
from harness.core.conditions import pooling_conflict
from harness.core.errors import ModelError
from harness.models.litert_convert import conversion_tool, converter_versions, missing_extra
from harness.models.resolve import resolve_model, sha256_of
from harness.store.results import iter_all_runs
from tests.conftest import save_checked
from tests.helpers import entry, profile_json, session_runs

pytest.importorskip("ai_edge_litert", reason="the litert extra is not installed (make test installs it)")
try:
    converter_versions()
except ModelError:
    pytest.skip("onnx2tf's venv is not installed (make test installs it: make setup-litert)", allow_module_level=True)
QUICK = ("--backend", "local", "--repeats", "2", "--iterations", "20", "--warmup", "2", "--cpus", "1")


@pytest.fixture(scope="module", autouse=True)
def conversion_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One conversion cache for the module: a model converted by one test is found converted by the next."""
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HARNESS_CACHE_DIR", str(cache))
        yield cache / "litert"


def make_swish_model(path: Path) -> Path:
    """One Swish node (ONNX opset 24): an operator onnx2tf has no converter for."""
    graph = helper.make_graph([helper.make_node("Swish", ["x"], ["y"])], "swish",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def test_a_zoo_model_runs_on_litert_with_latency_and_the_kernels_peak(capsys, tmp_path: Path,
                                                                      conversion_cache: Path) -> None:
    summary = profile_json(capsys, tmp_path, "nb201_0", "--runtime", "litert", *QUICK)
    runs = session_runs(tmp_path)
    assert [r["status"] for r in runs] == ["ok", "ok"]
    for run in runs:
        assert run["latency_stats_ms"]["n"] == 20 and run["latency_stats_ms"]["headline"] > 0
        assert run["peak_source"] == "kernel" and run["peak_memory_mib"] > 10 and run["load_s"] > 0
        assert run["metrics"]["engine"] == "litert" and run["metrics"]["threads"] == 1
        assert run["metrics"]["input_shapes"].endswith("=1x32x32x3")  # the ONNX input's NCHW, as NHWC
        assert run["model_kind"] == "tflite" and run["model_path"].endswith(".onnx")  # the model is the ONNX file
        assert run["model_sha256"] == sha256_of(Path(run["model_path"]))
        assert run["conditions"]["runtime"] == f"ai-edge-litert {run['metrics']['engine_version']}"
        assert run["conditions"]["conversion"] == run["model_conversion"] == conversion_tool()
        assert conversion_tool().startswith("onnx2tf 1.")
        assert Path(run["model_converted"]).parent == conversion_cache
    assert entry(summary, "nb201_0")["statuses"] == {"ok": 2}
    (converted,) = conversion_cache.glob("nb201_0-*")
    assert converted.suffix == ".tflite"
    stamp = converted.stat().st_mtime_ns
    profile_json(capsys, tmp_path / "again", "nb201_0", "--runtime", "litert", *QUICK)
    assert converted.stat().st_mtime_ns == stamp  # converted once: the second session found it
    assert sorted(conversion_cache.iterdir()) == [converted]  # only the float32 file reached the cache, whole


def test_a_dynamic_batch_stays_dynamic_for_batch_size(capsys, tmp_path: Path) -> None:
    profile_json(capsys, tmp_path, "nb201_0", "--runtime", "litert", *QUICK, "--repeats", "1", "--batch-size", "3")
    (run,) = session_runs(tmp_path)
    assert run["status"] == "ok" and run["metrics"]["input_shapes"].endswith("=3x32x32x3")


def test_two_engines_runs_of_one_model_are_never_pooled(capsys, tmp_path: Path) -> None:
    for runtime in ("onnxruntime", "litert"):
        profile_json(capsys, tmp_path, "nb201_0", "--runtime", runtime, *QUICK)
    runs = list(iter_all_runs(tmp_path))
    assert {r["conditions"]["runtime"].split()[0] for r in runs} == {"onnxruntime", "ai-edge-litert"}
    assert len({r["model_sha256"] for r in runs}) == 1  # the same model, two engines
    assert "differ in RUNTIME" in (pooling_conflict(runs) or "")
    capsys.readouterr()
    assert main(["rank", "--session", "all", "--results-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "differ in RUNTIME" in err and "ai-edge-litert " in err and "onnxruntime 1." in err


def test_a_model_over_the_memory_limit_is_oom_and_the_session_goes_on(capsys, tmp_path: Path) -> None:
    """One Relu over a 32 MiB input, which the script draws and LiteRT holds as its input and its output tensor, under
    a 64 MiB limit; nb201_0 fits. (Large activations, not weights: onnx2tf takes minutes over 64 MiB of weights.)"""
    big = tmp_path / "big_relu.onnx"
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 1024, 1024])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 1024, 1024])])
    save_checked(graph, big)
    summary = profile_json(capsys, tmp_path / "results", str(big), "nb201_0", "--runtime", "litert",
                           *QUICK, "--repeats", "1", "--memory", "64m")
    runs = {r["model_name"]: r for r in session_runs(tmp_path / "results")}
    big_run = runs["big_relu"]
    said = {k: big_run.get(k) for k in ("status", "exit_code", "signal", "oom_kills", "peak_memory_mib", "stderr_tail")}
    assert big_run["status"] == "oom" and big_run["peak_memory_mib"] <= 64.5, json.dumps(said) + kernel_log_tail()
    assert runs["nb201_0"]["status"] == "ok"
    assert entry(summary, "big_relu")["statuses"] == {"oom": 1}


def kernel_log_tail() -> str:
    """The kernel's last lines (its OOM report, when it killed), for a failure's message; empty where unreadable."""
    shown = subprocess.run(["dmesg"], capture_output=True, text=True, check=False) if shutil.which("dmesg") else None
    return "\n" + "\n".join(shown.stdout.splitlines()[-12:]) if shown is not None and shown.returncode == 0 else ""


def test_an_op_onnx2tf_cannot_convert_is_one_line_its_runs_are_errors_and_the_others_go_on(capsys,
                                                                                          tmp_path: Path) -> None:
    swish = make_swish_model(tmp_path / "swish.onnx")
    capsys.readouterr()
    assert main(["profile", "--json", "--results-dir", str(tmp_path / "results"), str(swish), "nb201_0",
                 "--runtime", "litert", *QUICK]) == 0
    out, err = capsys.readouterr()
    refusal = [line for line in err.splitlines() if line.startswith("warning:")]
    assert refusal == [f"warning: model swish: LiteRT has no operator Swish ({conversion_tool()} could not convert "
                       "it); run this model with RUNTIME=onnxruntime (its runs are recorded as errors)"]
    runs = session_runs(tmp_path / "results")
    assert {r["status"] for r in runs if r["model_name"] == "swish"} == {"error"}
    assert all("LiteRT has no operator Swish" in r["stderr_tail"] for r in runs if r["model_name"] == "swish")
    assert {r["status"] for r in runs if r["model_name"] == "nb201_0"} == {"ok"}
    assert entry(json.loads(out), "swish")["statuses"] == {"error": 2}


def test_an_int8_zoo_model_is_quantized_by_litert_and_a_quantized_onnx_file_is_refused(capsys,
                                                                                         tmp_path: Path) -> None:
    """LiteRT's int8 model is its float model quantized by LiteRT's converter (int8 kernels), as a phone's is; the
    onnxruntime QDQ graph would go through onnx2tf as float, so given as a file it is refused."""
    from ai_edge_litert.interpreter import Interpreter

    summary = profile_json(capsys, tmp_path / "results", "nb201_0_int8_static", "nb201_0", "--runtime", "litert",
                           *QUICK)
    runs = session_runs(tmp_path / "results")
    assert {r["status"] for r in runs} == {"ok"}
    quantized = next(r for r in runs if r["model_name"] == "nb201_0_int8_static")
    plain = next(r for r in runs if r["model_name"] == "nb201_0")
    assert quantized["conditions"]["conversion"] == f"{conversion_tool()} (int8 static quantization)"
    assert plain["conditions"]["conversion"] == conversion_tool()
    assert "differ in" in pooling_conflict([quantized.line, plain.line])
    kinds = {tflite: {t["dtype"].__name__ for t in Interpreter(model_path=tflite).get_tensor_details()}
             for tflite in (quantized["model_converted"], plain["model_converted"])}
    assert "int8" in kinds[quantized["model_converted"]] and "int8" not in kinds[plain["model_converted"]]
    assert entry(summary, "nb201_0_int8_static")["statuses"] == {"ok": 2}
    qdq = tmp_path / "qdq.onnx"
    qdq.write_bytes(Path(quantized["model_path"]).read_bytes())
    refused = resolve_model(str(qdq), runtime="litert").refused  # the one line its runs are recorded with
    assert refused.startswith("model qdq: a quantized ONNX graph (DequantizeLinear, QuantizeLinear) "
                                         "becomes a float model through onnx2tf; give its float model")


def test_a_missing_converter_is_one_line_naming_how_to_install_it(capsys, monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path, tiny_onnx: Path) -> None:
    monkeypatch.setenv("HARNESS_LITERT_VENV", str(tmp_path / "no-venv"))  # as a checkout before make setup-litert
    with pytest.raises(ModelError, match="make setup-litert"):
        resolve_model(str(tiny_onnx), runtime="litert")
    capsys.readouterr()
    assert main(["profile", "--results-dir", str(tmp_path), str(tiny_onnx), "--runtime", "litert", *QUICK]) == 2
    assert capsys.readouterr().err == f"harness: error: {missing_extra()}\n"
    assert str(tmp_path / "no-venv") in missing_extra()


def test_make_asks_for_the_extra_only_when_litert_runs_and_it_is_missing(monkeypatch: pytest.MonkeyPatch,
                                                                         in_tmp_cwd: Path) -> None:
    assert main(["zoo", "needs-extra", "--extra", "litert", "m.tflite"]) == 1  # installed here
    monkeypatch.setenv("HARNESS_SET_RUNTIME", "litert")  # make profile RUNTIME=litert
    assert main(["zoo", "needs-extra", "--extra", "litert", "m.onnx"]) == 1
    monkeypatch.setenv("HARNESS_LITERT_VENV", str(in_tmp_cwd / "no-venv"))
    assert main(["zoo", "needs-extra", "--extra", "litert", "m.onnx"]) == 0
    monkeypatch.delenv("HARNESS_SET_RUNTIME")
    assert main(["zoo", "needs-extra", "--extra", "litert", "m.onnx"]) == 1  # RUNTIME is onnxruntime
    monkeypatch.setitem(sys.modules, "ai_edge_litert", None)
    assert main(["zoo", "needs-extra", "--extra", "litert", "m.tflite"]) == 0
