"""The package installs whole: a wheel built from this checkout (sdist first, then the wheel from it, as
`python -m build` does), installed into a fresh venv outside the checkout, profiles the built-in examples, ranks them,
imports device data and predicts from it, with its bench scripts, presets, library tables and examples found as
package data. The venv borrows the dependencies already installed (a .pth file naming this venv's site-packages) and
installs the wheel alone, so nothing is downloaded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("build", reason="builds the wheel with `python -m build` (the dev extra installs it)")


def checkout_copy(target: Path) -> Path:
    """The files git knows (tracked, or new and not ignored), copied: the build writes nothing into the checkout."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def fresh_venv(folder: Path) -> Path:
    """A venv with no harness in it, that sees this venv's installed dependencies."""
    venv.EnvBuilder(with_pip=False).create(folder)
    purelib = Path(subprocess.run([folder / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()"
                                   "['purelib'])"], check=True, capture_output=True, text=True).stdout.strip())
    (purelib / "borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return folder / "bin"


def test_the_wheel_installed_outside_the_checkout_profiles_ranks_and_predicts(tmp_path: Path) -> None:
    source = checkout_copy(tmp_path / "src")
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path / "dist"), str(source)],
                   check=True, capture_output=True)
    wheel = next((tmp_path / "dist").glob("harness-*.whl"))
    bin_dir = fresh_venv(tmp_path / "venv")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "install", "--no-deps",
                    "--no-index", "--quiet", str(wheel)], check=True, capture_output=True)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_") and k != "PYTHONPATH"}

    def harness(*args: str) -> str:
        done = subprocess.run([str(bin_dir / "harness"), *args], cwd=work, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr
        return done.stdout

    where = subprocess.run([bin_dir / "python", "-c", "import harness; print(harness.__file__)"], cwd=work, env=env,
                           check=True, capture_output=True, text=True).stdout
    assert str(tmp_path / "venv") in where and str(ROOT) not in where
    summary = json.loads(harness("profile", "--device", "raspberry-pi-4", "--backend", "local", "--repeats", "2",
                                 "--iterations", "10", "--results-dir", "results", "--json"))
    models = sorted(m["model_name"] for m in summary["models"])
    assert models == ["mobilenet_v1_0.25_128", "mobilenet_v1_0.25_224", "squeezenet1_1"]
    assert summary["device_name"] == "raspberry-pi-4" and summary["memory_mib"] == 4096
    ranked = json.loads(harness("rank", "--results-dir", "results", "--json"))
    assert sorted(r["model"] for r in ranked["ranking"]) == models
    assert "ncnn-rpi4b-4t" in harness("devices", "--results-dir", "results")
    # A device about 12× slower than this host, each model off that by a few percent: fixed device numbers would
    # disagree with a loaded host's own by more than three models let any fit bound.
    measured = {m["model_name"]: m["metrics"]["latency_ms"]["median"] for m in summary["models"]}
    device = {model: 12 * measured[model] * wobble for model, wobble in zip(models, (1.04, 0.97, 1.02), strict=True)}
    (work / "pi.csv").write_text("model,latency_ms\n" + "".join(f"{m},{v:.3f}\n" for m, v in device.items()))
    harness("import-device", "pi.csv", "--device", "my-pi", "--results-dir", "results")
    predicted = json.loads(harness("predict", *models, "--device", "my-pi", "--results-dir", "results", "--json"))
    # Three models leave a fit one degree of freedom: on a loaded host one may lie beyond what it bounds, and says so.
    rows = predicted["predictions"]
    assert {p["model"] for p in rows} == set(models) and any(p["predicted"] for p in rows)
    for p in rows:
        assert (0 < p["pi_low"] < p["predicted"] < p["pi_high"]) if p["predicted"] else "cannot bound it" in p["note"]


if shutil.which("git") is None:
    pytestmark = pytest.mark.skip(reason="needs git to list the checkout's files")
