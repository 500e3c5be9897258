"""The zoo: a torch-free name grammar, real exports that onnxruntime runs with torch's own outputs, a cache
keyed by name and versions, and every family profiled under a device preset by the real CLI."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness import zoo
from harness.core.errors import ModelError
from harness.models.facts import onnx_facts
from tests.helpers import profile_json, session_runs
from tests.zoo_support import zoo_cache  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parent.parent
# The smallest published variant of every family but the two Inceptions (5 and 1.5 GMACs), AlexNet and VGG-16 (244 and
# 528 MB of weights): slow tests. The rest are exported and run in every `make test`.
SMALLEST = ["mobilenet_v1_0.25_128", "mobilenet_v2_0.25_96", "mnasnet_1.0_96", "squeezenet1_1", "shufflenet_v2_x0_25",
            "resnet18", "mobilenet_v3_small_0.35_224", "efficientnet_b0", "efficientnet_lite0", "regnet_y_400mf",
            "ghostnet_0.5_224", "squeezenet3d_1.1", "shufflenet_v2_3d_0.25", "mobilenet_v2_3d_0.2"]
# Models with a signature (named int64 inputs, dynamic seq / height / width: BERT, the detector) take other inputs
# than one float `input`: tests/test_zoo_tiny.py runs and profiles them.
OTHERS = [m["name"] for m in zoo.list_models() if m["name"] not in SMALLEST and "signature" not in m]


def test_grammar_and_listing_need_no_torch() -> None:
    code = ("import sys, harness.zoo as z; assert z.is_zoo_name('mobilenet_v2_0.5_224'); z.list_models(); "
            "z.parse('resnet18'); print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'torchvision'))))")
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_names_are_canonical_and_bad_values_name_the_allowed_ones() -> None:
    assert zoo.parse("mobilenet_v2_1_224").name == "mobilenet_v2_1.0_224"
    assert zoo.parse("mobilenet_v1_0.50_128").name == "mobilenet_v1_0.5_128"
    spec = zoo.parse("shufflenet_v2_x0_5_int8_static")
    assert (spec.quant, spec.base_name, spec.input_shape) == ("static", "shufflenet_v2_x0_5", (1, 3, 224, 224))
    assert zoo.parse("mobilenet_v2_3d_0.45").input_shape == (1, 3, 16, 112, 112)
    assert zoo.parse("mobilenet_v3_large_1_224").name == "mobilenet_v3_large_1.0_224"
    assert zoo.parse("ghostnet_1.30_160").input_shape == (1, 3, 160, 160)
    assert [zoo.parse(f"efficientnet_lite{v}").input_shape[-1] for v in range(5)] == [224, 240, 260, 280, 300]
    for not_zoo in ("model.onnx", "resnet34", "mobilenet_v3_1.0_224", "squeezenet1_2", "efficientnet_lite5", "vgg19"):
        assert not zoo.is_zoo_name(not_zoo), not_zoo
    with pytest.raises(ModelError, match=r"alpha 0.6 is not one of 0.25, 0.35, 0.5, 0.75, 1.0, 1.3, 1.4, 1.5, 2.0"):
        zoo.parse("mobilenet_v2_0.6_224")
    with pytest.raises(ModelError, match="resolution 100 is not a multiple of 32"):
        zoo.parse("mobilenet_v1_1.0_100")
    with pytest.raises(ModelError, match="exists as onnx only"):
        zoo.export("resnet18_int8_dynamic", "torchscript")


def test_listing_covers_every_family_and_round_trips() -> None:
    models = zoo.list_models()
    assert {m["family"] for m in models} == {f.key for f in zoo.FAMILIES}
    assert all(zoo.parse(m["name"]).name == m["name"] for m in models)
    assert len({m["name"] for m in models}) == len(models)
    assert set(SMALLEST) <= {m["name"] for m in models}


# Runs the CLI as if torch were not installed: a finder that refuses torch, as a torch-free venv would.
_WITHOUT_TORCH = """
import importlib.abc, sys
class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("torch", "torchvision"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoTorch())
from harness.cli import main
sys.exit(main(["zoo", "export", "squeezenet1_1"]))
"""


def test_missing_torch_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _WITHOUT_TORCH], capture_output=True, text=True, cwd=ROOT,
                          env={"HARNESS_ZOO_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "harness: error: zoo models need torch: install the zoo extra: make setup-zoo"
    ]


def _export_matches_torch(name: str) -> None:
    """The ONNX export, run by onnxruntime at batch 2, gives the seeded torch network's outputs."""
    torch = pytest.importorskip("torch")
    import onnxruntime as ort

    from harness.zoo.build import build

    spec = zoo.parse(name)
    path = zoo.export(name)
    x = np.random.default_rng(0).standard_normal((2, *spec.input_shape[1:])).astype(np.float32)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"input": x})
    with torch.no_grad():
        want = build(spec)(torch.from_numpy(x)).numpy()
    assert got.shape == (2, spec.num_classes)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max()))
    facts = onnx_facts(path)
    assert facts["inputs"][0]["shape"][1:] == list(spec.input_shape[1:])
    assert facts["macs"] > 0 and facts["layers"] > 0


@pytest.mark.usefixtures("zoo_cache")
@pytest.mark.parametrize("name", SMALLEST + [pytest.param(n, marks=pytest.mark.slow) for n in OTHERS])
def test_export_runs_in_onnxruntime_like_torch(name: str) -> None:
    _export_matches_torch(name)


def test_cache_is_reused_keyed_and_reproducible(
    zoo_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # noqa: F811  (the imported fixture)
) -> None:
    pytest.importorskip("torchvision")
    path = zoo.export("mobilenet_v1_0.25_128")
    assert path.parent == zoo_cache and path.name.startswith("mobilenet_v1_0.25_128-")
    stamp = path.stat().st_mtime_ns
    assert zoo.export("mobilenet_v1_0.25_128") == path and path.stat().st_mtime_ns == stamp
    assert zoo.export("mobilenet_v1_0.25_160") != path  # parameters are part of the key
    monkeypatch.setenv("HARNESS_ZOO_DIR", str(tmp_path))
    again = zoo.export("mobilenet_v1_0.25_128")
    assert again.parent == tmp_path and again.name == path.name
    digest = [hashlib.sha256(p.read_bytes()).hexdigest() for p in (path, again)]
    assert digest[0] == digest[1], "a fresh export of the same name and versions must give the same bytes"
    assert not list(tmp_path.glob(".*"))  # no temp file left behind


@pytest.mark.usefixtures("zoo_cache")
@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:FutureWarning")
def test_torchscript_export_agrees_with_onnx() -> None:
    torch = pytest.importorskip("torch")
    import onnxruntime as ort

    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    scripted = torch.jit.load(str(zoo.export("squeezenet1_1", "torchscript")))
    with torch.no_grad():
        want = scripted(torch.from_numpy(x)).numpy()
    session = ort.InferenceSession(str(zoo.export("squeezenet1_1")), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"input": x})[0], want, rtol=1e-3, atol=1e-3 * np.abs(want).max())


@pytest.mark.usefixtures("zoo_cache")
def test_torchscript_export_profiles_with_its_input_shape(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("torchvision")
    path = zoo.export("squeezenet1_1", "torchscript")
    shape = "x".join(map(str, zoo.parse("squeezenet1_1").input_shape))
    profile_json(capsys, tmp_path, str(path), "--backend", "local", "--repeats", "1", "--iterations", "3",
                 "--", "--shape", f"input={shape}")
    (run,) = session_runs(tmp_path)
    assert run["status"] == "ok", run.get("stderr_tail")
    assert run["model_kind"] == "torch" and run["latency_stats_ms"]["n"] == 3


def _profile_zoo(capsys: pytest.CaptureFixture[str], tmp_path: Path, names: list[str]) -> None:
    pytest.importorskip("torchvision")
    summary = profile_json(capsys, tmp_path / "results", *names, "--env", str(ROOT / "devices" / "jetson-nano.env"),
                           "--backend", "local", "--repeats", "1", "--iterations", "3", "--warmup", "1")
    runs = session_runs(tmp_path / "results")
    assert sorted(r["model_name"] for r in runs) == sorted(names)
    for run in runs:
        assert run["status"] == "ok", (run["model_name"], run.get("stderr_tail"))
        assert run["device_name"] == "jetson-nano" and run["memory_mib"] == 4096
        assert run["latency_stats_ms"]["n"] == 3 and run["peak_memory_mib"] > 0
        assert run["model_facts"] == onnx_facts(zoo.export(run["model_name"]))
    assert {e["model_name"] for e in summary["models"]} == set(names)


@pytest.mark.usefixtures("zoo_cache")
def test_every_family_profiles_under_a_device_preset(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _profile_zoo(capsys, tmp_path, SMALLEST + ["mobilenet_v2_0.25_96_int8_static"])


@pytest.mark.slow
@pytest.mark.usefixtures("zoo_cache")
def test_every_listed_model_profiles(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _profile_zoo(capsys, tmp_path, OTHERS)


@pytest.mark.usefixtures("zoo_cache")
def test_cli_lists_exports_and_quantizes_zoo_names(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torchvision")
    from harness.cli import main

    assert main(["zoo", "list", "--names"]) == 0
    assert capsys.readouterr().out.split() == [m["name"] for m in zoo.list_models()]
    assert main(["zoo", "export", "mobilenet_v1_0.25_128", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    path = zoo.export("mobilenet_v1_0.25_128")
    assert row == {"name": "mobilenet_v1_0.25_128", "path": str(path), **onnx_facts(path)}
    assert main(["zoo", "list"]) == 0
    listing = capsys.readouterr().out
    assert "mobilenet_v1_<alpha>_<res>" in listing and "_int8_static" in listing
    assert main(["quantize", "mobilenet_v1_0.25_128", "--mode", "dynamic"]) == 0
    assert str(zoo.export("mobilenet_v1_0.25_128_int8_dynamic")) in capsys.readouterr().out
    assert main(["zoo", "export", "mobilenet_v1_0.3_128"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "alpha 0.3 is not one of 0.25, 0.5, 0.75, 1.0" in err
