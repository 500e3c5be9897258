"""Models beyond one image tensor, profiled for real with onnxruntime: DIMS sizes a dynamic sequence length, token
ids stay within the embedding's vocabulary, INPUTS feeds real arrays, and what cannot run stops before any run."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from harness.cli import main
from harness.core.config import load_profile
from harness.core.errors import ConfigError
from harness.models.facts import onnx_facts
from tests.helpers import profile_json, session_runs
from tests.token_models import encoder_macs, make_encoder

QUICK = ("--backend", "local", "--repeats", "1", "--iterations", "5", "--warmup", "1")


@pytest.fixture
def encoder(in_tmp_cwd: Path) -> Path:
    return make_encoder(in_tmp_cwd / "encoder.onnx", vocab=7)


def refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """The one error line of a profile that must stop before its session (exit 2)."""
    capsys.readouterr()
    assert main(["profile", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err


def test_a_dynamic_dimension_without_a_size_stops_before_any_run(capsys, encoder: Path, in_tmp_cwd: Path) -> None:
    err = refused(capsys, str(encoder), *QUICK)
    assert "input 'input_ids' has dynamic dimension 'seq' (index 1)" in err and 'DIMS="seq=N"' in err
    assert "--dim seq=128" in err
    assert not (in_tmp_cwd / "results").exists()  # no session directory, so no runs


def test_dims_size_the_sequence_and_token_ids_stay_in_the_vocabulary(capsys, encoder: Path, in_tmp_cwd: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    session = ort.InferenceSession(str(encoder), providers=["CPUExecutionProvider"])
    ones = np.ones((1, 16), dtype=np.int64)
    with pytest.raises(Exception, match="out of bounds|out of range|indices"):  # what [0, 10) ids would hit
        session.run(None, {"input_ids": ones * 7, "attention_mask": ones})
    results = in_tmp_cwd / "results"
    profile_json(capsys, results, str(encoder), *QUICK, "--dim", "seq=16")
    run = session_runs(results)[0]
    assert run["status"] == "ok", run["stderr_tail"]
    assert run["conditions"]["dims"] == "seq=16" and run["conditions"]["inputs"] is None
    assert run["model_facts"]["macs"] == encoder_macs(16) == 5120
    monkeypatch.setenv("HARNESS_SET_DIMS", "seq=24")  # how `make profile DIMS="seq=24"` passes it
    profile_json(capsys, results, str(encoder), *QUICK)
    run = session_runs(results)[0]
    assert run["status"] == "ok" and run["conditions"]["dims"] == "seq=24"
    assert run["model_facts"]["macs"] == encoder_macs(24)


def test_a_dims_name_no_model_has_is_a_note(capsys, encoder: Path, in_tmp_cwd: Path) -> None:
    results = in_tmp_cwd / "results"
    profile_json(capsys, results, str(encoder), *QUICK, "--dim", "seq=8", "--dim", "sqe=8")
    info = json.loads(next(results.glob("*/session.json")).read_text())
    assert any("DIMS sets sqe" in note for note in info["notes"]), info["notes"]


@pytest.mark.parametrize("value", ["seq", "seq=0", "seq=-3", "=5", "seq=12x"])
def test_a_bad_dims_value_is_one_error_naming_dims(in_tmp_cwd: Path, value: str) -> None:
    with pytest.raises(ConfigError, match=r"^DIMS=.*expected sizes of named dynamic dimensions"):
        load_profile(None, {"DIMS": value}, environment={})


def test_dims_are_canonical() -> None:
    profile = load_profile(None, {"DIMS": "w=320,h=320  seq=128 w=256"}, environment={})
    assert profile.dims == "h=320 seq=128 w=256" and profile.dim_sizes == {"h": 320, "seq": 128, "w": 256}


def test_inputs_file_is_fed_and_recorded(capsys, encoder: Path, in_tmp_cwd: Path) -> None:
    results = in_tmp_cwd / "results"
    good = in_tmp_cwd / "good.npz"
    np.savez(good, input_ids=np.arange(12, dtype=np.int64).reshape(1, 12) % 7,
             attention_mask=np.ones((1, 12), dtype=np.int64))
    profile_json(capsys, results, str(encoder), *QUICK, "--inputs", str(good))
    run = session_runs(results)[0]
    assert run["status"] == "ok", run["stderr_tail"]
    assert run["conditions"]["inputs"] == hashlib.sha256(good.read_bytes()).hexdigest()
    assert run["conditions"]["dims"] == "seq=12"  # the file's sequence length, no DIMS needed
    assert run["model_facts"]["macs"] == encoder_macs(12)
    # ids of 9 are out of the vocabulary of 7: the runs fail, as they only can when the file's values are fed
    bad_ids = in_tmp_cwd / "bad_ids.npz"
    np.savez(bad_ids, input_ids=np.full((1, 12), 9, dtype=np.int64), attention_mask=np.ones((1, 12), dtype=np.int64))
    profile_json(capsys, results, str(encoder), *QUICK, "--inputs", str(bad_ids))
    run = session_runs(results)[0]
    assert run["status"] == "error" and "9" in run["stderr_tail"]


@pytest.mark.parametrize(("arrays", "expected"), [
    ({"input_ids": np.zeros((1, 4), np.int64)}, "has no array 'attention_mask'"),
    ({"input_ids": np.zeros((1, 4), np.int32), "attention_mask": np.ones((1, 4), np.int64)},
     "array 'input_ids' is int32, but encoder.onnx takes int64"),
    ({"input_ids": np.zeros((4,), np.int64), "attention_mask": np.ones((1, 4), np.int64)},
     "array 'input_ids' has shape [4], but encoder.onnx takes rank 2"),
    ({"input_ids": np.zeros((2, 4), np.int64), "attention_mask": np.ones((2, 4), np.int64)},
     "set BATCH_SIZE=2"),
    ({"input_ids": np.zeros((1, 4), np.int64), "attention_mask": np.ones((1, 5), np.int64)},
     "gives dimension 'seq' size 5, another input 4"),
])
def test_an_inputs_file_that_does_not_fit_stops_before_any_run(capsys, encoder: Path, in_tmp_cwd: Path,
                                                                 arrays: dict[str, np.ndarray], expected: str) -> None:
    path = in_tmp_cwd / "inputs.npz"
    np.savez(path, **arrays)
    err = refused(capsys, str(encoder), *QUICK, "--inputs", str(path))
    assert f"INPUTS={path}" in err and expected in err
    assert not (in_tmp_cwd / "results").exists()


def test_an_inputs_file_that_is_not_an_npz_is_one_line(capsys, encoder: Path, in_tmp_cwd: Path) -> None:
    (in_tmp_cwd / "inputs.npz").write_text("not a zip")
    assert "is not a readable .npz" in refused(capsys, str(encoder), *QUICK, "--inputs", "inputs.npz")
    assert "no such file" in refused(capsys, str(encoder), *QUICK, "--inputs", "absent.npz")


def test_facts_count_attention_at_the_dims_sizes(encoder: Path) -> None:
    unsized, sized = onnx_facts(encoder), onnx_facts(encoder, {"seq": 32})
    assert unsized["macs"] == encoder_macs(1)  # a symbolic dimension counts as 1, as before DIMS
    assert sized["macs"] == encoder_macs(32) == 32 * 64 + 2 * 32 * 32 * 8
    assert sized["params"] == unsized["params"]
    assert [item["shape"] for item in sized["inputs"]] == [["batch", 32]] * 2
    assert {item["name"]: item["values"] for item in sized["inputs"]} == {"input_ids": {"high": 7},
                                                                          "attention_mask": {"fill": 1}}


def make_conv(path: Path, height: str | int | None = "h", width: str | int | None = "w") -> Path:
    """A detector's first layer: x [batch, 3, h, w] -> Conv 3->4, 3x3, padded: its output has the input's size."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "weight")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, height, width])
    graph = helper.make_graph([helper.make_node("Conv", ["x", "weight"], ["y"], pads=[1, 1, 1, 1], name="conv")],
                              "conv", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_a_detector_with_dynamic_height_and_width_runs_at_the_dims_size(capsys, in_tmp_cwd: Path) -> None:
    model = make_conv(in_tmp_cwd / "detector.onnx")
    results = in_tmp_cwd / "results"
    assert "dynamic dimension 'h' (index 2)" in refused(capsys, str(model), *QUICK, "--dim", "w=16")
    profile_json(capsys, results, str(model), *QUICK, "--dim", "h=16", "--dim", "w=20")
    run = session_runs(results)[0]
    assert run["status"] == "ok", run["stderr_tail"]
    assert run["conditions"]["dims"] == "h=16 w=20"
    assert run["model_facts"]["macs"] == 16 * 20 * 4 * 3 * 3 * 3  # output elements x input channels x kernel


def test_an_unnamed_dynamic_dimension_is_refused_naming_the_fix(capsys, in_tmp_cwd: Path) -> None:
    model = make_conv(in_tmp_cwd / "unnamed.onnx", height=None, width=8)
    err = refused(capsys, str(model), *QUICK, "--dim", "h=8")
    assert "input 'x' has an unnamed dynamic dimension (index 2)" in err and "INPUTS=file.npz" in err


def test_the_per_op_table_of_a_dims_model_counts_its_matmuls_at_the_size(capsys, encoder: Path,
                                                                         in_tmp_cwd: Path) -> None:
    results = in_tmp_cwd / "results"
    profile_json(capsys, results, str(encoder), *QUICK, "--dim", "seq=32", "--per-op")
    assert session_runs(results)[0]["status"] == "ok"
    capsys.readouterr()
    assert main(["ops", "encoder", "--json", "--results-dir", str(results)]) == 0
    (table,) = json.loads(capsys.readouterr().out)["tables"]
    macs = {op["onnx_node"]: op["macs"] for op in table["ops"] if op["onnx_node"]}
    assert macs["matmul_1"] == 32 * 8 * 8 and macs["matmul_8"] == 32 * 32 * 8  # projection; attention's context
    assert macs["softmax_7"] == macs["layernormalization_9"] == 0


@pytest.mark.parametrize("sized", [("--dim", "seq=8"), ("--", "--dim", "seq=8")])
def test_a_resumed_session_runs_at_the_sizes_it_was_planned_with(capsys, encoder: Path, in_tmp_cwd: Path,
                                                                  sized: tuple[str, ...]) -> None:
    results = in_tmp_cwd / "results"
    profile_json(capsys, results, str(encoder), "--backend", "local", "--repeats", "2", "--iterations", "5",
                 "--warmup", "1", *sized)
    runs_file = next(results.glob("*/runs.jsonl"))
    runs_file.write_text(runs_file.read_text().splitlines(keepends=True)[0])  # the second run lost
    capsys.readouterr()
    assert main(["profile", "--resume", runs_file.parent.name, "--results-dir", str(results), "--json"]) == 0
    runs = session_runs(results)
    assert len(runs) == 2 and all(run["status"] == "ok" and run["conditions"]["dims"] == "seq=8" for run in runs)
