"""BACKEND for TARGET=ssh://...: the session's runs on a real board, through its agent (harness.backends.target.agent).

The host plans, converts models once (RUNTIME=ncnn or litert) and stores every record, as for a local session; the
board runs each run with the same runner and the same local backend, under its own kernel's limits. The files a
session needs (the harness's own code, the bench scripts, models, INPUTS) go to the board once, into a folder of
that session's, which the agent removes as it ends; an interrupted host, a lost connection or a killed agent leave
it to the next session's sweep. Several boards of one kind make a farm: runs go to whichever board is free, and a
board that drops out loses only its run in flight, which another board then runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import queue
import secrets
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from harness.backends.base import Elsewhere
from harness.backends.local import GRACE_S
from harness.backends.target.board import SESSIONS, Board, last_line
from harness.backends.target.transport import Connection, ssh_failure
from harness.core.errors import BackendError, StorageError
from harness.core.records import Limits, RunOutcome, RunResult
from harness.core.targets import TARGET_BACKEND, Address
from harness.measure.spec import RunSpec

if TYPE_CHECKING:
    from harness.models.resolve import ModelInfo

PACKAGE = Path(__file__).resolve().parents[2]  # the harness package, sent as it is
BOOT = "import sys; sys.path.insert(0, 'code'); from harness.backends.target.agent import serve; serve()"
START = 'cd "$1" && PYTHONPATH="$PWD/code" exec "$2" -I -c "$3"'
"""The agent's start on the board: in its session's folder, the harness's code importable by the bench scripts it
starts. Isolated (-I), with its Python's site-packages, whose engine versions every record names. The values are
sh's positional arguments, each quoted: none is read as code."""
READY_S = 300.0  # an emulated board's Python takes a while to import the local backend
ENGINE_MODULES = {"onnx_bench.py": "onnxruntime", "ncnn_bench.py": "ncnn", "torch_bench.py": "torch",
                  "tflite_bench.py": "ai_edge_litert"}
LITERT_MODULES = ("ai_edge_litert", "tflite_runtime")
RUNTIME_OF = {"onnxruntime": "onnxruntime", "ncnn": "ncnn", "ai_edge_litert": "litert", "torch": "onnxruntime"}


class BoardLost(BackendError):
    """The board stopped answering mid-session: its run in flight is lost, and the board is out of the session."""


def _key(path: str) -> str:
    """A short name for a host path's folder on the board (the board never sees the host's paths)."""
    return hashlib.sha256(path.encode()).hexdigest()[:16]


class TargetBackend:
    """One board. Connects, reads its facts and starts its agent when made; `check` sends the models."""

    name = TARGET_BACKEND
    warm_runners = False
    runner_off_workload_cores = True

    def __init__(self, address: Address) -> None:
        self.address = address
        self.connection = Connection(address).open()
        self.board = Board(self.connection)
        self._lock = threading.Lock()
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._paths: dict[str, str] = {}  # host path -> its path in the session's folder on the board
        self.folder = f"{SESSIONS}/{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"
        self._errors: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - the agent's stderr, closed by close()
        self._agent: subprocess.Popen[bytes] | None = None
        try:
            facts = self.board.probe()
            self.board.call("sweep", SESSIONS, doing="removing what killed sessions left")
            self.board.upload(self.folder, code_files())
            self.ready = self._start_agent()
        except BaseException:
            self.close()
            raise
        self.metadata: dict[str, Any] = {**self.ready["metadata"], "board": self.board_facts(), "target": self.url}
        self.cores: tuple[int, ...] = tuple(facts["cores"])
        self.elsewhere: Elsewhere | None = Elsewhere(self.cores, self.metadata)

    @property
    def url(self) -> str:
        return self.address.url

    def board_facts(self) -> dict[str, Any]:
        """What every record says of the board (its facts, less what changes from run to run)."""
        keep = ("hostname", "machine", "system", "release", "kernel_version", "cpu_model", "board_model", "cpu_count",
                "cores", "memory_mib", "python", "engines", "energy", "cgroup", "libc")
        return {key: self.board.facts.get(key) for key in keep}

    def _start_agent(self) -> dict[str, Any]:
        python = self.board.facts["executable"]  # absolute: the agent starts in its session's folder
        agent = self._agent = self.connection.start(["sh", "-c", START, "harness-agent", self.folder, python, BOOT],
                                                    self._errors)
        threading.Thread(target=self._read, args=(agent.stdout,), daemon=True,
                         name=f"agent-{self.address.label}").start()
        ready = self._reply(READY_S, "starting the harness's agent")
        if "ready" not in ready:
            raise BackendError(f"board {self.url}: the agent did not start ({ready})")
        return ready

    def _read(self, stream: IO[bytes]) -> None:
        for line in stream:
            self._lines.put(line.decode(errors="replace"))
        self._lines.put(None)

    def _reply(self, timeout_s: float, doing: str) -> dict[str, Any]:
        """The agent's next line; BoardLost when it ended (the connection dropped, the board went down)."""
        try:
            line = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            raise BoardLost(f"board {self.url}: no answer in {timeout_s:g} s while {doing}; check the board") from None
        if line is None:
            raise self._lost(doing)
        return dict(json.loads(line))

    def _lost(self, doing: str) -> BoardLost:
        """Why the agent's connection ended, in one line."""
        if self._agent is not None:
            with contextlib.suppress(Exception):
                self._agent.wait(timeout=10)
        self._errors.seek(0)
        text = self._errors.read().decode(errors="replace")
        if self._agent is not None and self._agent.returncode not in (255, None) and text.strip():
            return BoardLost(f"board {self.url}: the harness's agent ended while {doing} ({last_line(text.encode())})")
        return BoardLost(str(ssh_failure(self.address, text, doing)))

    def describe(self) -> dict[str, Any]:
        info = self.ready["describe"]
        return {"backend": self.name, "target": self.url, "isolation": info.get("isolation"),
                "isolation_reason": f"on board {self.url}: {info.get('isolation_reason')}",
                "swap_capped": info.get("swap_capped", False), "board": self.board_facts()}

    def check(self, models: Sequence[ModelInfo]) -> None:
        """Each model's engine must be on the board (else: `harness target setup`); then every file its runs read
        goes to the board, once."""
        engines = self.board.facts.get("engines") or {}
        for model in models:
            module = ENGINE_MODULES.get(Path(model.script).name)
            if module == "ai_edge_litert" and any(name in engines for name in LITERT_MODULES):
                continue
            if module and module not in engines:
                runtime = RUNTIME_OF.get(module, "onnxruntime")
                raise BackendError(f"board {self.url} has no {module} for {model.name} (its Python: "
                                   f"{self.board.python}); install it there with `harness target setup {self.url} "
                                   f"--runtime {runtime}`")
        files: list[tuple[Path, str]] = []
        for model in models:
            self._place(files, str(model.script), "scripts")
            if model.run_model:
                folder = Path(model.run_model).parent
                for path in model_files(model):
                    self._place(files, path, "models", folder)
            if model.inputs_file:
                self._place(files, model.inputs_file, "inputs")
        if files:
            self.board.upload(self.folder, files)

    def _place(self, files: list[tuple[Path, str]], path: str, kind: str, folder: Path | None = None) -> None:
        """Where `path` goes on the board: kind/<key>/<its name>, beside the files of its folder (a model's data)."""
        if path in self._paths:
            return
        local = Path(path)
        key = _key(str(folder if folder is not None else local))
        name = local.relative_to(folder).as_posix() if folder is not None else local.name
        self._paths[path] = f"{kind}/{key}/{name}"
        files.append((local, self._paths[path]))

    def run(self, spec: RunSpec) -> RunOutcome:
        board_spec = replace(spec, model=self._paths.get(spec.model, spec.model) if spec.model else "",
                             script=self._paths[spec.script], image="",
                             inputs_file=self._paths.get(spec.inputs_file, "") if spec.inputs_file else "")
        started = time.monotonic()
        with self._lock:
            if self._agent is None or self._agent.stdin is None:
                raise BoardLost(f"board {self.url}: its agent is not running")
            try:
                self._agent.stdin.write((json.dumps({"run": board_spec.to_dict()}) + "\n").encode())
                self._agent.stdin.flush()
            except OSError:
                raise self._lost(f"sending run {spec.run_id}") from None
            reply = self._reply(spec.timeout_s + GRACE_S + 60, f"run {spec.run_id}")
        if "error" in reply:
            if reply.get("kind") == "storage":
                raise StorageError(Path(f"{self.url}:~/{self.folder}"), reply["error"], None, None)
            raise BackendError(f"board {self.url}: {reply['error']}")
        outcome = reply["outcome"]
        returned = time.monotonic()
        result = RunResult.from_dict(outcome["result"])
        applied = Limits.from_dict(outcome["applied"]) if outcome["applied"] is not None else None
        clock = {**{f"board_{k}": v for k, v in outcome["clock_s"].items()}, "target_sent": started,
                 "target_returned": returned}
        overhead = max(returned - started - (result.runtime_s or 0.0), 0.0)
        board = {"target": self.url, "hostname": self.board.facts.get("hostname"), **reply["board"]}
        return RunOutcome(result, applied, overhead, clock_s=clock, board=board)

    def cancel(self) -> None:
        """Stop the run in flight: the agent's input closes, and it kills its runs and removes the session's folder;
        whatever still names that folder on the board is then killed and removed from here."""
        self.close()

    def close(self) -> None:
        agent, self._agent = self._agent, None
        if agent is not None:
            with contextlib.suppress(OSError):
                if agent.stdin is not None:
                    agent.stdin.write(b'{"bye": true}\n')
                    agent.stdin.close()
            try:
                agent.wait(timeout=30)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait()
        with contextlib.suppress(BackendError):
            self.board.call("clean", self.folder, doing="removing the session's files")
        self.connection.close()
        self._errors.close()


def code_files() -> list[tuple[Path, str]]:
    """The harness's own modules, as the board's agent imports them (code/harness/...): its Python files alone, not
    the data an installed package carries (bench scripts and example models go as a session needs them)."""
    return [(path, f"code/harness/{path.relative_to(PACKAGE).as_posix()}") for path in sorted(PACKAGE.rglob("*.py"))
            if "__pycache__" not in path.parts]


def model_files(model: ModelInfo) -> list[str]:
    """The files a model's runs read: the model, its external data, and an ncnn .param's .bin."""
    from harness.core.external_data import confine, data_files

    run_model = model.run_model
    files = [run_model, *data_files(run_model, confine(run_model, model.external_data))]
    weights = Path(run_model).with_suffix(".bin")
    if run_model.endswith(".param") and weights.is_file():
        files.append(str(weights))
    return files


class FarmBackend:
    """Several boards of one kind: each run goes to a free board; a board that drops out hands its run in flight to
    another, and the session goes on while one board is left."""

    name = TARGET_BACKEND
    warm_runners = False
    runner_off_workload_cores = True

    def __init__(self, boards: Sequence[TargetBackend]) -> None:
        self.boards = list(boards)
        self._free: queue.Queue[TargetBackend] = queue.Queue()
        for board in self.boards:
            self._free.put(board)
        self._live = len(self.boards)
        self._count = threading.Lock()
        self.dropped: list[str] = []  # one line per board that dropped out
        cores = set.intersection(*(set(board.cores) for board in self.boards))
        metadata = {**self.boards[0].metadata, "target": self.url,
                    "farm": [board.metadata["board"] for board in self.boards]}
        self.elsewhere: Elsewhere | None = Elsewhere(tuple(sorted(cores)), metadata, len(self.boards))

    @property
    def url(self) -> str:
        return " ".join(board.url for board in self.boards)

    def describe(self) -> dict[str, Any]:
        return {**self.boards[0].describe(), "target": self.url, "boards": [board.url for board in self.boards]}

    def check(self, models: Sequence[ModelInfo]) -> None:
        for board in self.boards:
            board.check(models)

    def run(self, spec: RunSpec) -> RunOutcome:
        while True:
            board = self._take()
            try:
                outcome = board.run(spec)
            except BoardLost as err:
                self._drop(board, err, spec)
                continue
            self._free.put(board)
            return outcome

    def _take(self) -> TargetBackend:
        while True:
            with self._count:
                if self._live == 0:
                    raise BackendError(f"every board of TARGET dropped out ({'; '.join(self.dropped)})")
            with contextlib.suppress(queue.Empty):
                return self._free.get(timeout=1.0)

    def _drop(self, board: TargetBackend, err: BoardLost, spec: RunSpec) -> None:
        with self._count:
            self._live -= 1
            self.dropped.append(str(err))
            left = self._live
        import sys

        print(f"{err}; run {spec.run_id} goes to another board ({left} left)", file=sys.stderr)
        with contextlib.suppress(Exception):
            board.close()

    def cancel(self) -> None:
        for board in self.boards:
            board.cancel()

    def close(self) -> None:
        for board in self.boards:
            board.close()


def target_backend(target: str) -> TargetBackend | FarmBackend:
    """TARGET's backend: one board, or a farm of them (each connected at once, in threads of their own)."""
    from concurrent.futures import ThreadPoolExecutor

    from harness.core.targets import target_addresses

    addresses = target_addresses(target)
    if len(addresses) == 1:
        return TargetBackend(addresses[0])
    with ThreadPoolExecutor(len(addresses)) as pool:
        futures = [pool.submit(TargetBackend, address) for address in addresses]
        boards, errors = [], []
        for future in futures:
            try:
                boards.append(future.result())
            except BackendError as err:
                errors.append(err)
    if errors:
        for board in boards:
            board.close()
        raise errors[0]
    kinds = {(board.metadata["board"]["machine"], board.metadata["board"]["cpu_model"]) for board in boards}
    if len(kinds) > 1:
        for board in boards:
            board.close()
        raise BackendError(f"TARGET names boards of different kinds ({'; '.join(' '.join(k) for k in sorted(kinds))})"
                           ": a farm's runs are pooled as one device, so give boards of one kind")
    return FarmBackend(boards)
