"""A tool that answers at once: `harness --help`, `doctor`, `zoo list` and a profile session load none of the heavy
libraries that only analysis, reports and model export need. Each command runs in a fresh interpreter, which then
reports every module it holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("scipy", "pandas", "matplotlib", "onnx", "torch", "numpy")
"""What a command may load only when it needs it (numpy comes with every one of the others)."""
PROBE = """
import json, sys
from harness.cli import main
try:
    main(sys.argv[2:])
except SystemExit:
    pass
finally:
    with open(sys.argv[1], "w") as out:
        json.dump(sorted({name.partition(".")[0] for name in sys.modules}), out)
"""


def loaded(tmp_path: Path, *argv: str, env: dict[str, str] | None = None) -> set[str]:
    """The top-level packages a fresh interpreter holds after `harness ARGV` (whatever its exit status)."""
    listing = tmp_path / "modules.json"
    done = subprocess.run([sys.executable, "-c", PROBE, str(listing), *argv], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, timeout=600)
    assert listing.exists(), done.stderr
    return set(json.loads(listing.read_text()))


def test_help_loads_no_heavy_library_and_no_rich(tmp_path: Path) -> None:
    assert loaded(tmp_path, "--help") & {*HEAVY, "rich"} == set()


@pytest.mark.parametrize("argv", [("doctor",), ("zoo", "list")], ids=" ".join)
def test_doctor_and_zoo_list_load_no_heavy_library(tmp_path: Path, argv: tuple[str, ...]) -> None:
    modules = loaded(tmp_path, *argv)
    assert "harness" in modules and modules & set(HEAVY) == set()


def test_a_profile_session_loads_no_heavy_library_once_the_models_facts_are_known(tmp_path: Path,
                                                                                    tiny_onnx: Path) -> None:
    """The model's graph is read with onnx the first time its content is seen; from then on its facts come from the
    cache and the whole session, from start to summary, loads none of the heavy libraries."""
    argv = ("profile", str(tiny_onnx), "--backend", "local", "--repeats", "1", "--iterations", "3", "--warmup", "1",
            "--results-dir", str(tmp_path / "results"), "--json")
    env = {"HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    assert "onnx" in loaded(tmp_path, *argv, env=env)
    assert loaded(tmp_path, *argv, env=env) & set(HEAVY) == set()
    assert len(list((tmp_path / "results").iterdir())) == 2  # both sessions ran
