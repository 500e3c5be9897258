"""The package's shape: folders by stage, each importing only from the folders below it, no import circles, and
no module over MAX_LINES. Every import counts, those inside functions too: a lazy import is still a dependency."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "harness"
MAX_LINES = 500
LAYERS = ("core", "measure", "zoo", "models", "backends", "store", "device", "analysis", "kernels", "calibration",
          "report", "run", "api", "commands")
"""Lowest first: a module may import from its own folder and from folders listed before it."""
TOP = ("harness.cli", "harness.docgen")
"""Above every folder: the command line's entry point, and the generator of docs/ that reads every command."""


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The harness modules `path` imports: `from a import b` counts as a.b where a.b is a module, else as a. The
    package root's `if TYPE_CHECKING:` imports are left out: they give checkers the types of the public names its
    lazy table (harness.API) already names, and are never run."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only = {id(inner) for node in tree.body if name == "harness" and isinstance(node, ast.If)
                 and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING" for inner in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                kept = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*kept, *filter(None, [base])])
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        found.update(target for target in targets if target in known and target != name)
    return found


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imported(name, path, set(found)) for name, path in found.items()}


def rank(module: str) -> float:
    """The layer of a module: its folder's index; the package root is below everything, the CLI above."""
    if module == "harness":
        return -1
    if module in TOP:
        return len(LAYERS)
    folder = module.split(".")[1]
    assert folder in LAYERS, f"{module}: a module outside the stage folders; put it in one of {', '.join(LAYERS)}"
    return LAYERS.index(folder)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), each one import circle or several."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles() -> None:
    assert cycles(graph()) == []


def test_cycle_finder_finds_a_planted_circle() -> None:
    edges = {**graph(), "harness.core.errors": {"harness.analysis.run_values"}}
    assert any({"harness.core.errors", "harness.analysis.run_values"} <= set(group) for group in cycles(edges))


def test_lower_folders_never_import_higher_ones() -> None:
    upward = [f"{source} imports {target}" for source, targets in graph().items() for target in targets
              if rank(target) > rank(source)]
    assert upward == []


@pytest.mark.parametrize("name", sorted(modules()))
def test_module_size(name: str) -> None:
    lines = len(modules()[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines; split it by what its parts are for"


def test_architecture_page_names_every_folder_in_order() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("\n## ", 1)[0]
    named = [folder for folder in re.findall(r"harness/(\w+)/", section) if folder in LAYERS]
    assert list(dict.fromkeys(named)) == list(LAYERS)


def command_modules() -> set[str]:
    from harness.commands import COMMANDS

    return {f"harness.commands.{name.replace('-', '_')}" for name in COMMANDS}


def test_no_command_module_imports_another() -> None:
    """What two commands share lives in harness.commands.shared (or below, in run/ and the stages): a command that
    imports another's module drags in its imports and ties their changes together."""
    commands = command_modules()
    crossing = [f"{source} imports {target}" for source, targets in graph().items() if source in commands
                for target in targets & commands]
    assert crossing == []


def test_every_command_imports_the_shared_module_one_way() -> None:
    """`from harness.commands.shared import name`: never the module under another name."""
    other_ways = [f"{module_name(path)}: {ast.unparse(node)}" for path in sorted((PACKAGE / "commands").glob("*.py"))
                  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                  if isinstance(node, ast.Import) and any(a.name == "harness.commands.shared" for a in node.names)
                  or isinstance(node, ast.ImportFrom) and node.module == "harness.commands"
                  and any(a.name == "shared" for a in node.names)]
    assert other_ways == []


def reflection_on_backends(source: str) -> list[str]:
    """Each hasattr/getattr call whose first argument names a backend (`backend`, `self.backend`, `agent.backend`...):
    what a backend offers is the Backend protocol, never probed at run time."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr") \
                and node.args:
            target = node.args[0]
            name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) \
                else ""
            if "backend" in name.lower():
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_no_hasattr_or_getattr_on_a_backend() -> None:
    paths = [*sorted(PACKAGE.rglob("*.py")), *sorted((ROOT / "tests").rglob("*.py")),
             *sorted((ROOT / "benchmarks").rglob("*.py"))]
    found = [f"{path.relative_to(ROOT)} {call}" for path in paths
             for call in reflection_on_backends(path.read_text(encoding="utf-8"))]
    assert found == []


def test_the_backend_reflection_check_finds_a_planted_call() -> None:
    planted = "if hasattr(self.backend, 'cancel'):\n    getattr(backend, 'cancel')()\nhasattr(spec, 'cpu')\n"
    assert reflection_on_backends(planted) == ["line 1: hasattr(self.backend, 'cancel')",
                                               "line 2: getattr(backend, 'cancel')"]
