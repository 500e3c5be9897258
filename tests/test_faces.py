"""The package's face for bench scripts (`from harness import ...`): every name is the object its module defines, it
costs nothing until asked for, and the modules' former names are the same modules."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import harness

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", sorted(harness.FACE))
def test_each_face_name_is_the_object_its_module_defines(name: str) -> None:
    module, attribute = harness.FACE[name]
    assert module.startswith("harness.measure.")
    assert getattr(harness, name) is getattr(importlib.import_module(module), attribute)


def test_no_face_name_hides_a_module_of_the_package() -> None:
    paths = (ROOT / "harness").rglob("*.py")
    modules = {path.parent.name if path.name == "__init__.py" else path.stem for path in paths}
    assert set(harness.FACE) & modules == set()


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(ImportError, match="cannot import name 'timed_loops'"):
        from harness import timed_loops  # noqa: F401


@pytest.mark.parametrize("former", sorted(harness.FORMER_NAMES))
def test_each_former_name_is_the_module_it_names_now(former: str) -> None:
    assert importlib.import_module(former) is importlib.import_module(harness.FORMER_NAMES[former])
    assert sys.modules[former].__name__ == harness.FORMER_NAMES[former]


def test_import_harness_loads_nothing_else() -> None:
    """As the runner starts it: isolated, without site, only the package's directory on the path."""
    probe = (f"import sys; sys.path.append({str(ROOT)!r}); before = set(sys.modules); import harness; "
             "loaded = sorted(set(sys.modules) - before); import json; print(json.dumps(loaded))")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, check=True)
    assert set(json.loads(done.stdout)) <= {"harness", "__future__"}


def test_bench_scripts_import_the_package_through_its_face() -> None:
    internal = []
    for script in sorted((ROOT / "bench_scripts").glob("*.py")):
        for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("harness."):
                internal.append(f"{script.name}: {node.module}")
    assert internal == []


def test_the_package_itself_never_imports_a_former_name() -> None:
    used = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module] if isinstance(node, ast.ImportFrom) else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            used += [f"{path.relative_to(ROOT)}: {name}" for name in names if name in harness.FORMER_NAMES]
    assert used == []
