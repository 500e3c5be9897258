"""An ONNX model's external data comes only from files in its own folder: a location that is absolute, climbs out with
'..', leads out through a symlink or names no file is refused in one line by the facts reader, by `harness profile`
before any run (serial and --parallel), by a backend handed such a run, and by the runner itself; a model whose data
sits beside it runs, and its facts count the external weights. Docker and the cluster: test_docker.py and
test_cluster.py."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, external_data_helper, helper, numpy_helper

from harness.analysis.model_runs import model_matcher
from harness.backends.docker import MODEL_DIR, model_mounts
from harness.backends.local import LocalBackend
from harness.core.errors import ModelError
from harness.core.external_data import confine
from harness.measure.launch import runner_command
from harness.models.facts import node_facts, onnx_facts
from harness.models.resolve import resolve_model
from tests.conftest import ESCAPES, EXTERNAL_WEIGHT, WORKLOADS, make_escaping_model, make_external_data_model
from tests.helpers import run_spec, session_runs

MIB = 2**20


def assert_refusal(message: str, model: Path, tensor: str, location: str) -> None:
    """One line that names the model, the tensor and the path, and says where the data must be."""
    assert "\n" not in message.strip() and "Traceback" not in message, message
    assert str(model) in message and repr(tensor) in message and repr(location) in message, message
    assert "own folder" in message, message


@pytest.mark.parametrize("how", ESCAPES)
def test_facts_refuse_data_from_outside_the_folder(tmp_path: Path, how: str) -> None:
    model, location = make_escaping_model(tmp_path, how)
    for read in (onnx_facts, node_facts):  # the facts of a session, and the per-op profile's node facts
        with pytest.raises(ModelError) as refused:
            read(model)
        assert_refusal(str(refused.value), model, "W", location)


def test_a_missing_data_file_is_refused(tmp_path: Path) -> None:
    model = make_external_data_model(tmp_path / "model.onnx", "weights.bin")
    (tmp_path / "weights.bin").unlink()
    with pytest.raises(ModelError, match="a file that does not exist") as refused:
        onnx_facts(model)
    assert_refusal(str(refused.value), model, "W", "weights.bin")


def test_paths_that_stay_in_the_folder_are_kept(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(b"")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.bin").write_bytes(b"a")
    (tmp_path / "near").symlink_to(tmp_path / "sub", target_is_directory=True)
    entries = [("A", "sub/a.bin"), ("B", "sub/../sub/a.bin"), ("C", "near/a.bin"), ("D", "sub/a.bin")]
    assert confine(str(model), entries) == (("A", "sub/a.bin"), ("B", "sub/../sub/a.bin"), ("C", "near/a.bin"))
    with pytest.raises(ModelError, match="not a file"):
        confine(str(model), [("E", "sub")])


def _escaping_tensor(folder: Path, name: str) -> onnx.TensorProto:
    """A 1-float tensor named `name` whose data is kept at ../outside.bin (written there)."""
    tensor = numpy_helper.from_array(np.ones(1, np.float32), name)
    (folder.parent / "outside.bin").write_bytes(tensor.raw_data)
    external_data_helper.set_external_data(tensor, "../outside.bin", offset=0, length=4)
    tensor.ClearField("raw_data")
    return tensor


def test_tensors_in_subgraphs_and_constants_are_checked_too(tmp_path: Path) -> None:
    """An initializer of an If branch and the value of a Constant node are tensors too (onnx's own walk finds them)."""
    folder = tmp_path / "model"
    folder.mkdir()
    branch = helper.make_graph([helper.make_node("Identity", ["inner"], ["b"])], "branch", [],
                               [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1])],
                               [_escaping_tensor(folder, "inner")])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["o"])], "other", [],
                              [helper.make_tensor_value_info("o", TensorProto.FLOAT, [1])])
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graphs = {
        "inner": helper.make_graph([helper.make_node("If", ["cond"], ["y"], then_branch=branch, else_branch=other)],
                                   "if", [cond, x], [y]),
        "constant": helper.make_graph([helper.make_node("Constant", [], ["y"],
                                                        value=_escaping_tensor(folder, "constant"))], "c", [], [y]),
    }
    for tensor, graph in graphs.items():
        model = folder / f"{tensor}.onnx"
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
        with pytest.raises(ModelError) as refused:
            onnx_facts(model)
        assert_refusal(str(refused.value), model, tensor, "../outside.bin")


def test_facts_count_the_external_weights(tmp_path: Path) -> None:
    model = make_external_data_model(tmp_path / "model.onnx", "weights.bin")
    (tmp_path / "other.bin").write_bytes(bytes(1000))  # in the folder, but not the model's
    facts = onnx_facts(model)
    assert facts["params"] == EXTERNAL_WEIGHT.size and facts["macs"] == 16
    assert facts["size_mib"] * MIB == model.stat().st_size + EXTERNAL_WEIGHT.nbytes
    assert facts["external_data"] == [["W", "weights.bin"]]


def test_a_model_is_its_graph_and_its_data_files(tmp_path: Path) -> None:
    """The same graph beside other weights is another model (its content hash, so it never pools with the first) of
    another size; the graph alone, resolved once more, is the same model."""
    first = resolve_model(str(make_external_data_model(tmp_path / "a" / "model.onnx", "weights.bin")))
    other = make_external_data_model(tmp_path / "b" / "model.onnx", "weights.bin")
    (other.parent / "weights.bin").write_bytes(bytes(reversed((other.parent / "weights.bin").read_bytes())))
    second = resolve_model(str(other))
    assert (tmp_path / "a" / "model.onnx").read_bytes() == other.read_bytes()
    assert second.sha256 != first.sha256 and resolve_model(str(other)).sha256 == second.sha256
    assert first.size_mib * MIB == first.path.stat().st_size + EXTERNAL_WEIGHT.nbytes == second.size_mib * MIB


def test_a_cached_model_is_checked_again_on_every_resolve(tmp_path: Path) -> None:
    """The facts come from the cache the second time; the file beside the model is checked anyway."""
    model = make_external_data_model(tmp_path / "models" / "m" / "model.onnx", "weights.bin")
    assert resolve_model(str(model)).external_data == (("W", "weights.bin"),)
    secret = tmp_path / "models" / "secret"
    secret.mkdir()
    (model.parent / "weights.bin").rename(secret / "weights.bin")
    (model.parent / "weights.bin").symlink_to(secret / "weights.bin")
    with pytest.raises(ModelError, match="through a symlink") as refused:
        resolve_model(str(model))
    assert_refusal(str(refused.value), model, "W", "weights.bin")


def _profile(model: Path, results: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "harness.cli", "profile", str(model), "--backend", "local", "--repeats", "1",
            "--iterations", "3", "--warmup", "1", "--results-dir", str(results), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=results.parent)


@pytest.mark.parametrize("parallel", [(), ("--parallel", "2")], ids=["serial", "parallel"])
@pytest.mark.parametrize("how", ESCAPES)
def test_profile_refuses_in_one_line_before_any_run(tmp_path: Path, how: str, parallel: tuple[str, ...]) -> None:
    model, location = make_escaping_model(tmp_path, how)
    done = _profile(model, tmp_path / "results", *parallel)
    assert done.returncode == 2, done.stderr
    assert_refusal(done.stderr.removeprefix("harness: error: "), model, "W", location)
    assert not (tmp_path / "results").exists()


def test_profile_runs_a_model_whose_data_is_beside_it(tmp_path: Path) -> None:
    model = make_external_data_model(tmp_path / "models" / "model.onnx", "weights.bin")
    done = _profile(model, tmp_path / "results", "--repeats", "2")
    assert done.returncode == 0, done.stderr
    runs = session_runs(tmp_path / "results")
    assert [run["status"] for run in runs] == ["ok", "ok"], runs[0]["stderr_tail"]
    assert runs[0]["model_facts"]["params"] == EXTERNAL_WEIGHT.size
    assert all(model_matcher(str(model))(run) for run in runs)  # `harness ops model.onnx` finds them by content


def test_the_runner_refuses_before_it_starts_the_script(tmp_path: Path) -> None:
    """Its last guard: a spec whose data leaves the folder never reaches the script (which would leave a file)."""
    model, location = make_escaping_model(tmp_path, "dotdot")
    marker = tmp_path / "script-ran"
    script = tmp_path / "touch.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    spec = replace(run_spec(script, model=model), external_data=(("W", location),))
    spec_path, out = tmp_path / "spec.json", tmp_path / "result.json"
    spec_path.write_text(json.dumps(spec.runner_input(isolation="rlimit").to_dict()))
    done = subprocess.run(runner_command(spec_path, out), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert_refusal(done.stderr, model, "W", location)
    assert not marker.exists() and not out.exists()


def test_a_backend_refuses_such_a_run_before_it_reads_a_byte(tmp_path: Path) -> None:
    model, location = make_escaping_model(tmp_path, "symlink")
    spec = replace(run_spec(WORKLOADS / "sleep.py", "0", model=model), external_data=(("W", location),))
    backend = LocalBackend()
    try:
        with pytest.raises(ModelError) as refused:
            backend.run(spec)
    finally:
        backend.close()
    assert_refusal(str(refused.value), model, "W", location)


def test_docker_mounts_the_model_and_its_data_files_and_nothing_else(tmp_path: Path) -> None:
    model = make_external_data_model(tmp_path / "model.onnx", "parts/weights.bin")
    (tmp_path / "other.bin").write_bytes(b"not the model's")
    spec = replace(run_spec(WORKLOADS / "sleep.py", model=model), external_data=(("W", "parts/weights.bin"),))
    mounts = {mount["Target"]: (mount["Source"], mount["ReadOnly"]) for mount in model_mounts(spec)}
    assert mounts == {f"{MODEL_DIR}/model.onnx": (str(model), True),
                      f"{MODEL_DIR}/parts/weights.bin": (str(tmp_path / "parts" / "weights.bin"), True)}
