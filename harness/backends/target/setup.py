"""`harness target setup|check|clean`: what a board has and lacks, the engines installed into a venv of the harness's
own on it, and that venv removed.

Most boards have no route to a package index. The host downloads the engines' wheels for the board's platform (its
machine, glibc and Python, read from the board), installs them into a folder here with pip's --platform/--target, and
copies that folder into the board's venv (~/.cache/harness-target/env, made with the board's own `python3 -m venv`).
Nothing is installed outside that venv; `clean` removes it and every session folder.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.backends.target.board import BASE, ENV, ENV_PYTHON, Board, check_done, last_line
from harness.backends.target.transport import Connection
from harness.core.errors import BackendError
from harness.core.targets import Address
from harness.measure.provenance import installed_versions

PACKAGES = {"onnxruntime": ("numpy", "onnxruntime"), "ncnn": ("numpy", "ncnn"), "litert": ("numpy", "ai-edge-litert")}
"""What each RUNTIME needs on the board (the bench scripts import these alone)."""
OLDEST_MANYLINUX = 17


@dataclass
class SetupReport:
    """What `target setup` did, with its timings."""

    url: str
    packages: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    bytes_sent: int = 0


def platform_tags(facts: dict[str, Any]) -> list[str]:
    """pip's --platform values for the board: every manylinux its glibc runs, newest first."""
    libc, version = (facts.get("libc") or ["", ""])[:2]
    machine = facts["machine"]
    if libc != "glibc" or not version:
        raise BackendError(f"board {facts.get('hostname')}: its C library is {libc or 'unknown'}, not glibc; install "
                           "the engine into its Python yourself (pip install onnxruntime), then `harness target check`")
    minor = int(version.split(".")[1])
    return [*(f"manylinux_2_{n}_{machine}" for n in range(minor, OLDEST_MANYLINUX - 1, -1)), f"manylinux2014_{machine}"]


def pip_for_board(facts: dict[str, Any], requirements: list[str], into: Path) -> None:
    """Wheels for the board's platform, installed into `into` here (pip's own cache keeps them for the next board)."""
    version = ".".join(facts["python"].split(".")[:2])
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
               "--only-binary=:all:", "--target", str(into), "--python-version", version, "--implementation", "cp",
               *(arg for tag in platform_tags(facts) for arg in ("--platform", tag)), *requirements]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        raise BackendError(f"pip found no wheel of {' '.join(requirements)} for the board ({facts['machine']}, "
                           f"Python {version}, {'-'.join(facts['libc'])}): {lines[-1] if lines else 'no message'}")


def requirements(runtime: str) -> list[str]:
    """The runtime's packages, at this host's versions where it has them (the same engine on both sides)."""
    names = PACKAGES[runtime]
    here = installed_versions(names)
    return [f"{name}=={here[name]}" if name in here else name for name in names]


def missing(wanted: list[str], held: dict[str, str | None]) -> list[str]:
    """The requirements (`name` or `name==version`) that the board's Python does not hold at that version."""
    needed = []
    for requirement in wanted:
        name, _, version = requirement.partition("==")
        module = name.replace("-", "_")
        if module not in held or (version and held[module] != version):
            needed.append(requirement)
    return needed


def connect(address: Address) -> Board:
    board = Board(Connection(address).open())
    board.probe()
    return board


def setup(address: Address, runtimes: list[str]) -> SetupReport:
    """Make the board's venv (if missing) and install each runtime's wheels into it."""
    report = SetupReport(address.url)
    started = time.monotonic()
    board = connect(address)
    try:
        if not board.facts.get("env"):
            done = board.connection.run(["python3", "-m", "venv", "--without-pip", ENV], doing="making the venv")
            if done.returncode != 0:
                raise BackendError(f"board {address.url}: `python3 -m venv` failed ({last_line(done.stderr)}); "
                                   "install the board's venv module (Debian: apt-get install python3-venv)")
            board.probe()
        site = board.connection.run([ENV_PYTHON, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                                    doing="finding the venv's site-packages")
        check_done(address.url, site, "finding the venv's site-packages")
        report.seconds["connect"] = time.monotonic() - started
        for runtime in runtimes:
            wanted = missing(requirements(runtime), board.facts.get("engines") or {})
            if not wanted:
                continue
            mark = time.monotonic()
            with tempfile.TemporaryDirectory(prefix="harness-wheels-") as folder:
                pip_for_board(board.facts, wanted, Path(folder))
                report.seconds[f"download {runtime}"] = time.monotonic() - mark
                mark = time.monotonic()
                items = sorted(Path(folder).iterdir())
                report.bytes_sent += sum(p.stat().st_size for item in items for p in [item, *item.rglob("*")]
                                         if p.is_file())
                board.upload(site.stdout.decode().strip(), [(item, item.name) for item in items], ENV_PYTHON)
                report.seconds[f"copy {runtime}"] = time.monotonic() - mark
        board.probe()
        report.packages = {name: str(version) for name, version in (board.facts.get("engines") or {}).items()}
    finally:
        board.connection.close()
    report.seconds["total"] = time.monotonic() - started
    return report


def clean(address: Address) -> None:
    """Remove the harness's folder on the board (its venv and every session's files), killing what runs from it."""
    board = connect(address)
    try:
        board.call("clean", BASE, python="python3", doing="removing the harness's files")
    finally:
        board.connection.close()


def check(address: Address) -> tuple[dict[str, Any], list[str]]:
    """The board's facts, and one line per thing it lacks, each with its fix."""
    board = connect(address)
    board.connection.close()
    facts = board.facts
    lacks: list[str] = []
    engines = facts.get("engines") or {}
    for runtime, names in PACKAGES.items():
        missing = [name for name in names if name.replace("-", "_") not in engines]
        if missing:
            lacks.append(f"RUNTIME={runtime}: no {', '.join(missing)} in {facts['executable']}; "
                         f"`harness target setup {address.url} --runtime {runtime}`")
    cgroup = facts.get("cgroup") or {}
    if not cgroup.get("writable"):
        lacks.append("limits: this user cannot write the board's cgroups, so CPUS is an affinity and MEMORY an "
                     "address-space cap (each record says so); connect as root, or delegate a cgroup v2 subtree")
    if not facts.get("energy"):
        lacks.append("energy: no RAPL, hwmon power sensor, INA rail or tegrastats found; runs carry no energy")
    return facts, lacks
