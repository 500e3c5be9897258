"""Docker backend: one locked-down container per run, with the runner inside measuring the container's cgroup.

The container gets the run's CPU and memory limits, no network, a read-only root file system (with a
tmpfs /tmp), no capabilities and no new privileges; the model (with its external-data files beside it, and
nothing else of its folder) and the script are bind-mounted read-only and the runner prints its RunResult on
stdout. The outside adds what only it sees: the engine's OOMKilled flag, the exit status, and the time spent
creating and removing the container.
Containers carry a label and a unique name, and are removed whatever happens (Ctrl-C included).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import secrets
import socket
import stat
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import psutil
import requests
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.types import Mount

from harness.backends.base import Elsewhere, cache_model_file
from harness.backends.docker_args import DockerArgs, parse_docker_args
from harness.backends.docker_image import ENGINES_LABEL, SOURCE_LABEL, make_option, source_digest
from harness.backends.docker_results import applied_limits, last_json_line, outcome, reported_ok, runner_result
from harness.backends.engine import connect
from harness.backends.removals import Removals
from harness.backends.runner_report import StdoutReport
from harness.core.cache import cached
from harness.core.errors import BackendError
from harness.core.external_data import data_files
from harness.core.records import RunOutcome, RunResult
from harness.core.storage import writing
from harness.measure.spec import RunSpec
from harness.models.resolve import KINDS, ModelInfo

LABEL = "org.harness.run"  # every run container carries it (value: run id): `docker ps -a --filter label=...`
NAME_PREFIX = "harness-run-"
# Wall-clock time after which a container is an orphan (its harness was killed before it could remove it):
# a live session removes each container by then, so any session may sweep it.
DEADLINE_LABEL = "org.harness.deadline"
SWEEP_MARGIN_S = 60
# The harness process that created a container ("host/pid/start time"): once that process is gone, a container
# of it that has exited (or was never started) can only be a leftover, and the next session removes it at once.
OWNER_LABEL = "org.harness.owner"
ENDED_STATES = ("created", "exited", "dead")
GRACE_S = 15  # seconds beyond TIMEOUT_S before the container is killed from outside (the runner stops it first)
PIDS_LIMIT = 1024  # ample for thread pools and multiprocessing, bounded against fork bombs
PING_TIMEOUT_S = 5
SPEC_PATH, MODEL_DIR, SCRIPT_DIR = "/harness/spec.json", "/harness/model", "/harness/script"
INPUTS_PATH = "/harness/inputs.npz"  # INPUTS, mounted read-only where the script finds it (HARNESS_INPUTS)
RUNNER_COMMAND = ["python", "-m", "harness.measure.runner", "--spec", SPEC_PATH]
# Every container, runs and probes alike: no network, read-only root, no capabilities, no new privileges,
# bounded process count, tini as PID 1 (reaps orphans, and the container ends when the runner does).
HARDENING: dict[str, Any] = {"network_mode": "none", "read_only": True, "cap_drop": ["ALL"],
                             "security_opt": ["no-new-privileges"], "pids_limit": PIDS_LIMIT, "init": True}
PROBE_TIMEOUT_S, PROBE_MEMORY_BYTES = 60.0, 256 * 1024 * 1024
_PACKAGES_PROBE = (
    "import importlib.metadata as m, importlib.util as u, json, platform, sys\n"
    "names = ('onnxruntime', 'numpy', 'psutil', 'torch', 'ai-edge-litert', 'ncnn')\n"
    "found = {}\n"
    "for n in names:\n"
    "    try: found[n] = m.version(n)\n"
    "    except m.PackageNotFoundError: pass\n"
    "modules = [name for name in sys.argv[1:] if u.find_spec(name) is not None]\n"
    "print(json.dumps({'python': platform.python_version(), 'packages': found, 'modules': modules}))\n"
)
# Framework module a default bench script needs -> the `make image` option that adds it
IMAGE_OPTIONS = {"torch": "TORCH=1", "ai_edge_litert": "LITERT=1", "ncnn": "NCNN=1"}


def engine_status(image: str, runtime: str = "onnxruntime") -> tuple[bool, str]:
    """(usable, reason) for BACKEND=auto: an engine must answer, the image must exist and, when its label says which
    engines it runs (images built since it has one), run `runtime`'s."""
    try:
        client = connect(timeout=PING_TIMEOUT_S)
    except BackendError:
        return False, "no Docker engine answers"
    try:
        found = client.images.get(image)
    except ImageNotFound:
        return False, f"image {image} does not exist (run `make image`)"
    except (DockerException, requests.RequestException) as err:
        return False, f"the Docker engine failed to answer ({type(err).__name__})"
    finally:
        client.close()
    labels = found.labels or {}
    engines = labels.get(ENGINES_LABEL)
    if engines is not None and runtime not in engines.split(","):  # onnxruntime is in every image
        return False, (f"image {image} has no {runtime} for RUNTIME={runtime} (`make image {make_option(runtime)}` "
                       "adds it)")
    checkout = source_digest()
    stale = checkout is not None and labels.get(SOURCE_LABEL) != checkout
    note = " (built from other harness sources than this checkout: `make image` refreshes it)" if stale else ""
    return True, f"docker, since an engine answers and image {image} exists{note}"


def owner_label() -> str:
    """This harness process as OWNER_LABEL names it: the start time tells a reused pid apart."""
    return f"{socket.gethostname()}/{os.getpid()}/{psutil.Process().create_time():.2f}"


def owner_gone(owner: str | None) -> bool:
    """True only when the owner is known to be dead: same host, and its pid is free or holds another process.
    A container of a live harness (a parallel session about to read its logs) is never taken from it."""
    host, _, rest = (owner or "").partition("/")
    pid, _, started = rest.partition("/")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        return abs(psutil.Process(int(pid)).create_time() - float(started)) > 0.05
    except psutil.NoSuchProcess:
        return True
    except (psutil.Error, ValueError):
        return False


def sweep_orphans(client: docker.DockerClient) -> int:
    """Remove harness containers left behind: those past their deadline (a harness killed with SIGKILL or
    SIGTERM), and at once those that have ended while the harness that made them is gone (the engine died
    mid-session, or the harness was killed while the container was finishing)."""
    removed = 0
    for container in client.containers.list(all=True, filters={"label": DEADLINE_LABEL}):
        deadline = container.labels.get(DEADLINE_LABEL, "")
        expired = deadline.isdigit() and int(deadline) < time.time()
        ended = container.status in ENDED_STATES and owner_gone(container.labels.get(OWNER_LABEL))
        if expired or ended:
            with contextlib.suppress(NotFound, APIError):
                container.remove(force=True)
                removed += 1
    return removed


def _check_readable(path: Path, what: str) -> None:
    """The container runs as an unprivileged user: the mounted file must be readable by others."""
    try:
        mode = path.stat().st_mode
    except OSError:
        raise BackendError(f"{what} {path} does not exist; pass an existing file") from None
    if not stat.S_ISREG(mode):
        raise BackendError(f"{what} {path} is not a regular file; the Docker backend mounts single files")
    if not mode & stat.S_IROTH:
        raise BackendError(f"{what} {path} is not readable by the container's unprivileged user; "
                           f"run `chmod o+r {path}`")


def model_mounts(spec: RunSpec) -> list[Mount]:
    """The model and its external-data files (RunSpec.model_files, each checked to be a file in the model's folder),
    read-only, at the same places relative to each other under MODEL_DIR: nothing else of the model's folder."""
    folder = os.path.dirname(spec.model)
    mounts = []
    for path in spec.model_files:
        _check_readable(Path(path), "model" if path == spec.model else "external data file")
        mounts.append(Mount(f"{MODEL_DIR}/{os.path.relpath(path, folder)}", os.path.realpath(path), type="bind",
                            read_only=True))
    return mounts


def cpu_options(spec: RunSpec) -> dict[str, Any]:
    """Pinned whole CPUS -> cpuset_cpus; a quota -> nano_cpus (Docker's CFS quota over a 100 ms period)."""
    options: dict[str, Any] = {}
    if spec.cpu.cpuset:
        options["cpuset_cpus"] = spec.cpu.cpuset
    if spec.cpu.quota_us is not None:
        options["nano_cpus"] = round(spec.cpu.quota_us / spec.cpu.period_us * 1e9)
    return options


def container_name(run_id: str) -> str:
    """Unique even across parallel sessions with equal run ids: a random suffix."""
    safe = re.sub(r"[^a-zA-Z0-9_.-]", "-", run_id)[:80]
    return f"{NAME_PREFIX}{safe}-{secrets.token_hex(4)}"


def _engine_lost(err: Exception, spec: RunSpec) -> BackendError:
    return BackendError(f"the Docker engine stopped answering during run {spec.run_id} ({type(err).__name__}); "
                        "start it again (e.g. `systemctl start docker`)")


@dataclass(frozen=True)
class Finished:
    """What the engine tells about a container that ended by itself, or what its runner reported before it ended."""

    name: str
    id: str
    state: dict[str, Any] | None  # None: not waited for, since the runner reported a run that went well
    host_config: dict[str, Any]
    stdout: str
    stderr: str
    elapsed_s: float


class DockerBackend:
    """Runs each RunSpec in a fresh container of one image, resolved to its id once so a re-tag mid-session
    cannot mix images."""

    name = "docker"
    elsewhere: Elsewhere | None = None  # its runs run on this host
    grace_s = GRACE_S
    warm_runners = False  # each runner starts with its container: none is started ahead
    runner_off_workload_cores = False  # the runner runs in the container, on the workload's cores

    def __init__(self, image: str, docker_args: str | None = None) -> None:
        """`docker_args` defaults to $HARNESS_DOCKER_ARGS (make's DOCKER_ARGS); see docker_args.py."""
        self.extra: DockerArgs = parse_docker_args(
            os.environ.get("HARNESS_DOCKER_ARGS") if docker_args is None else docker_args)
        self.client = connect()
        try:
            found = self.client.images.get(image)
            self.orphans_removed = sweep_orphans(self.client)
        except ImageNotFound:
            self.client.close()
            raise BackendError(f"Docker image {image} does not exist; run `make image` (or set IMAGE)") from None
        except (DockerException, requests.RequestException) as err:
            self.client.close()
            raise BackendError(f"the Docker engine stopped answering ({type(err).__name__}); start it again "
                               "(e.g. `systemctl start docker`)") from None
        self.image, self.image_id = image, str(found.attrs["Id"])
        self.image_attrs = found.attrs
        self._info: dict[str, Any] | None = None
        self._live: set[str] = set()  # names of run containers in flight, for cancel() (parallel slots)
        self.removals = Removals(self._retire)

    def describe(self) -> dict[str, Any]:
        if self._info is None:
            try:
                self._info = self._collect_info()
            except (DockerException, requests.RequestException) as err:
                raise BackendError(f"the Docker engine stopped answering ({type(err).__name__}); start it again "
                                   "(e.g. `systemctl start docker`)") from None
        return self._info

    def _collect_info(self) -> dict[str, Any]:
        """Provenance for every result: which image (id, digests, source), which engine and cgroups."""
        engine = self.client.info()
        labels = (self.image_attrs.get("Config") or {}).get("Labels") or {}
        checkout = source_digest()
        inside = self._probe_image()
        return {
            "backend": self.name, "isolation": "docker", "image": self.image, "image_id": self.image_id,
            "image_digests": self.image_attrs.get("RepoDigests") or [],
            "image_created": self.image_attrs.get("Created"), "image_source_digest": labels.get(SOURCE_LABEL),
            "image_matches_checkout": checkout is not None and labels.get(SOURCE_LABEL) == checkout,
            "image_python": inside.get("python"), "image_packages": inside.get("packages", {}),
            "image_modules": inside.get("modules"),
            "engine_version": engine.get("ServerVersion"), "api_version": self.client.api.api_version,
            "cgroup_driver": engine.get("CgroupDriver"), "cgroup_version": engine.get("CgroupVersion"),
            "runtime": engine.get("DefaultRuntime"), "engine_kernel": engine.get("KernelVersion"),
            "swap_capped": bool(engine.get("SwapLimit")), "host_arch": platform.machine(),
            "docker_args": self.extra.describe(), "orphan_containers_removed": self.orphans_removed,
        }

    def _probe_image(self) -> dict[str, Any]:
        """Python and framework versions inside the image (the host's are not the ones that run). An image id names
        the image's content, so each image is probed once (harness.core.cache) rather than by a container per
        session; a probe that fails gives {} and is tried again next time."""
        frameworks = sorted({module for _, _, module, _ in KINDS.values()})
        command = ["python", "-c", _PACKAGES_PROBE, *frameworks]

        def probe() -> dict[str, Any]:
            try:
                done = self._contain(command, name=container_name("probe"), labels={LABEL: "probe"},
                                     timeout_s=PROBE_TIMEOUT_S, mem_limit=PROBE_MEMORY_BYTES)
            except (DockerException, requests.RequestException):
                return {}
            return (last_json_line(done.stdout) or {}) if done else {}

        probe_digest = hashlib.sha256(json.dumps(command).encode()).hexdigest()[:12]
        return cached("images", f"{self.image_id.removeprefix('sha256:')}-{probe_digest}", probe)

    def check(self, models: Sequence[ModelInfo]) -> None:
        """Every file the runs mount must be readable inside, and the image must hold each model's framework."""
        for model in models:
            _check_readable(Path(model.script), "bench script")
            if model.run_model:
                _check_readable(Path(model.run_model), "model")
                for path in data_files(model.run_model, model.external_data):
                    _check_readable(Path(path), "external data file")
                self._check_framework(Path(model.run_model), Path(model.script))

    def _check_framework(self, model: Path, script: Path) -> None:
        """A default bench script whose framework the image lacks would fail every run: say so once, first."""
        kind = KINDS.get(model.suffix.lower())
        modules = self.describe().get("image_modules")
        if kind is None or script.name != kind[1] or modules is None or kind[2] in modules:
            return
        rebuild = " ".join(["make image", *([IMAGE_OPTIONS[kind[2]]] if kind[2] in IMAGE_OPTIONS else [])])
        raise BackendError(f"image {self.image} has no {kind[2]} for {model.name}; rebuild it with `{rebuild}` "
                           "or use BACKEND=local")

    def run(self, spec: RunSpec) -> RunOutcome:
        script = Path(spec.script)
        _check_readable(script, "bench script")
        inside_script, inside_model = f"{SCRIPT_DIR}/{script.name}", ""
        mounts = [Mount(inside_script, str(script.resolve()), type="bind", read_only=True)]
        if spec.model:  # a script profiled as a whole has no model to mount
            model = Path(spec.model)
            mounts += model_mounts(spec)
            self._check_framework(model, script)
            inside_model = f"{MODEL_DIR}/{model.name}"
        if spec.inputs_file:
            _check_readable(Path(spec.inputs_file), "INPUTS file")
            mounts.append(Mount(INPUTS_PATH, os.path.realpath(spec.inputs_file), type="bind", read_only=True))
        started = time.monotonic()
        clock = {"backend_called": started}
        for path in spec.model_files:
            cache_model_file(path)
        with tempfile.TemporaryDirectory(prefix="harness-docker-") as workdir:
            spec_path = Path(workdir) / "spec.json"
            inside_inputs = INPUTS_PATH if spec.inputs_file else ""
            spec_text = json.dumps(spec.runner_input(model=inside_model, script=inside_script,
                                                     inputs_file=inside_inputs).to_dict())
            with writing(spec_path, len(spec_text)):
                spec_path.write_text(spec_text)
            spec_path.chmod(0o644)
            mounts.insert(0, Mount(SPEC_PATH, str(spec_path), type="bind", read_only=True))
            outcome_ = self._run_container(spec, mounts, clock)
        clock["backend_returned"] = time.monotonic()
        outcome_.clock_s = clock
        outcome_.overhead_s = max(clock["backend_returned"] - started - (outcome_.result.runtime_s or 0.0), 0.0)
        return outcome_

    def _run_container(self, spec: RunSpec, mounts: list[Mount], clock: dict[str, float]) -> RunOutcome:
        """One run's container; engine faults become one BackendError line naming the run."""
        limits = {"mem_limit": spec.memory_bytes, "memswap_limit": spec.memory_bytes + spec.swap_bytes,
                  **cpu_options(spec)}
        try:
            done = self._contain(
                RUNNER_COMMAND, name=container_name(spec.run_id), timeout_s=spec.timeout_s + self.grace_s,
                labels={LABEL: spec.run_id, "org.harness.session": spec.session_id}, mounts=mounts + self.extra.mounts,
                tmpfs={"/tmp": f"rw,nosuid,nodev,noexec,mode=1777,size={spec.memory_bytes}"}, clock=clock,
                reported=reported_ok, **limits, **self.extra.options())
        except ImageNotFound:
            raise BackendError(f"Docker image {self.image} ({self.image_id}) was removed during the session; "
                               "run `make image`") from None
        except APIError as err:
            raise BackendError(f"the Docker engine refused run {spec.run_id}: {err.explanation or err}") from None
        except (requests.RequestException, DockerException) as err:
            raise _engine_lost(err, spec) from None
        swap_capped = bool(self.describe().get("swap_capped"))
        if done is None:
            # Killed from outside before it could be inspected: the engine was asked for these limits.
            asked = {"NanoCpus": limits.get("nano_cpus"), "CpusetCpus": limits.get("cpuset_cpus"),
                     "Memory": limits["mem_limit"], "MemorySwap": limits["memswap_limit"]}
            return RunOutcome(RunResult.failure("timeout", spec.timeout_s + self.grace_s,
                                                "the container did not stop in time"),
                              applied_limits(asked, swap_capped))
        result = outcome(runner_result(done.stdout, self.image), done.state or {}, done.stderr, done.elapsed_s)
        state = done.state
        container = {"name": done.name, "id": done.id,
                     "oom_killed": bool(state.get("OOMKilled")) if state is not None else None,
                     "exit_code": state.get("ExitCode") if state is not None else None}
        return RunOutcome(result, applied_limits(done.host_config, swap_capped), container=container)

    def _contain(self, command: list[str], *, name: str, labels: dict[str, str], timeout_s: float,
                 clock: dict[str, float] | None = None, reported: Callable[[str], bool] | None = None,
                 **options: Any) -> Finished | None:
        """Create, start and wait for one hardened container, collect its output, and always remove it: at once when
        something went wrong (Ctrl-C, a lost engine), else off the critical path (Removals). With `reported`, its first
        stdout line is read as it is written, and when `reported(line)` holds, that line is all it gives: its end is
        left to Removals too (runner_report). None when it outlived timeout_s and was killed. Engine errors propagate.
        `clock` gets when it was created, started, and its report read, or seen ended and read."""
        clock = {} if clock is None else clock
        self._live.add(name)
        report: StdoutReport | None = None
        try:
            deadline = str(int(time.time() + timeout_s + SWEEP_MARGIN_S))
            container = self.client.containers.create(self.image_id, command, name=name,
                                                      labels={**labels, DEADLINE_LABEL: deadline,
                                                              OWNER_LABEL: owner_label()},
                                                      **HARDENING, **options)
            clock["container_created"] = time.monotonic()
            self.removals.settle()  # no engine teardown of an earlier run goes on beside this one's script
            report = StdoutReport(self.client.api, str(container.attrs["Id"])) if reported else None
            started = time.monotonic()
            container.start()
            clock["container_started"] = time.monotonic()
            finished = self._read_report(container, report, reported, started, started + timeout_s, clock) or (
                self._finish(container, max(started + timeout_s - time.monotonic(), 0.1), started, clock))
        except BaseException:
            self._remove(name)  # by name: Ctrl-C may have come while the engine was creating it (no handle yet)
            raise
        finally:
            if report is not None:
                report.close()
            self._live.discard(name)
        self.removals.submit(name)  # while the harness stores this run and creates the next container
        return finished

    @staticmethod
    def _read_report(container: Any, report: StdoutReport | None, reported: Callable[[str], bool] | None,
                     started: float, deadline: float, clock: dict[str, float]) -> Finished | None:
        """The container's first stdout line when `reported` takes it as the whole outcome, without waiting for the
        container's end; None when it is not (a run that failed: the engine's view is wanted), none came, or nothing
        was to be read."""
        line = report.first_line(deadline) if report is not None and reported is not None else None
        if line is None or reported is None or not reported(line):
            return None
        clock["report_read"] = time.monotonic()
        return Finished(name=container.name, id=container.id, state=None,
                        host_config=container.attrs.get("HostConfig", {}), stdout=line, stderr="",
                        elapsed_s=clock["report_read"] - started)

    def _finish(self, container: Any, timeout_s: float, started: float, clock: dict[str, float]) -> Finished | None:
        """Wait for a started container to end and read what the engine tells about it; None when it outlived
        timeout_s and was killed."""
        try:
            container.wait(timeout=timeout_s)
        except requests.RequestException:
            # The SDK reports a wait that timed out as a connection error: tell it apart from a lost engine.
            if not self._engine_answers():
                raise
            with contextlib.suppress(APIError):  # it may have exited just now
                container.kill()
            return None
        clock["container_exited"] = time.monotonic()
        container.reload()
        finished = Finished(
            name=container.name, id=container.id, state=container.attrs.get("State", {}),
            host_config=container.attrs.get("HostConfig", {}), elapsed_s=clock["container_exited"] - started,
            stdout=container.logs(stdout=True, stderr=False).decode(errors="replace"),
            stderr=container.logs(stdout=False, stderr=True).decode(errors="replace"))
        clock["container_read"] = time.monotonic()
        return finished

    def _retire(self, name: str) -> None:
        """Wait for a container to end (a runner that has reported may still be leaving), then remove it; a container
        still there GRACE_S later is removed all the same. Never raises."""
        with contextlib.suppress(NotFound, APIError, requests.RequestException, DockerException):
            self.client.api.wait(name, timeout=GRACE_S)
        self._remove(name)

    def _remove(self, name: str) -> None:
        """Remove a container by name, whatever state it is in; one the engine no longer knows is no error."""
        with contextlib.suppress(NotFound, APIError, requests.RequestException, DockerException):
            self.client.containers.get(name).remove(force=True)

    def _engine_answers(self) -> bool:
        try:
            return bool(self.client.ping())
        except (DockerException, requests.RequestException):
            return False

    def cancel(self) -> None:
        """Remove every run container in flight (from another thread); their waits then return."""
        for name in list(self._live):
            with contextlib.suppress(NotFound, APIError, requests.RequestException, DockerException):
                self.client.containers.get(name).remove(force=True)

    def close(self) -> None:
        """Wait for the containers still being removed, then drop the engine connection."""
        self.removals.settle()
        self.client.close()
