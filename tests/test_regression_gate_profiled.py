"""`harness check` on profiled sessions: a model, then the same file name holding a model that does twice the work,
each profiled for real with the local backend, as a CI job would profile a baseline and a change.

Five repeats each: on a shared host a burst of other load slows a run 3-4× for seconds, and at 3 + 3 repeats one
such baseline run beside one quiet slow run already breaks the full separation that p = 1/20 needs; the 3 + 3
boundary itself is tested on stored sessions (tests/test_regression_gate.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.cli import main
from harness.store.results import list_sessions, load_runs
from tests.conftest import save_checked

pytestmark = pytest.mark.slow
"""In `make test-slow`: at the end of the full suite on a 2-core host the baseline session ran 40% slow in three CI
runs of four (twice the work measured 1.38-1.46x; about 2x alone, in its own process or not), for a cause not found."""

PROFILE = ("--backend", "local", "--cpus", "1", "--memory", "1g", "--repeats", "5", "--iterations", "20",
           "--warmup", "3")


def make_mlp(path: Path, passes: int, size: int = 1024, batch: int = 64, layers: int = 3) -> Path:
    """MatMul+Relu layers over a [batch, size] input, applied `passes` times with the same weights: twice the
    passes is twice the arithmetic with the same parameters, so the same memory for weights. At size 1024 one pass
    takes milliseconds, so the host's fixed cost per inference (a few tenths of a millisecond, more when another
    process wakes on the core) cannot pull twice the work under 1.5 times the time, as it did at size 512."""
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array((rng.standard_normal((size, size)) / size).astype(np.float32), f"w{i}")
               for i in range(layers)]
    nodes, current = [], "x"
    for step in range(passes * layers):
        nodes += [helper.make_node("MatMul", [current, f"w{step % layers}"], [f"m{step}"]),
                  helper.make_node("Relu", [f"m{step}"], [f"r{step}"])]
        current = f"r{step}"
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, size])],
                              [helper.make_tensor_value_info(current, TensorProto.FLOAT, [batch, size])], weights)
    path.parent.mkdir(parents=True, exist_ok=True)
    return save_checked(graph, path)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two sessions of a model called `net`: the baseline, then the version that does twice the work."""
    root = tmp_path_factory.mktemp("gate")
    results = root / "results"
    sessions = []
    for version, passes in (("v1", 1), ("v2", 2)):
        model = make_mlp(root / version / "net.onnx", passes)
        # A harness process of its own, as a user runs it: in the test process, whatever earlier tests left there
        # (threads, a large heap) ran beside the first session and slowed it by a third in the full suite.
        done = subprocess.run([sys.executable, "-m", "harness.cli", "profile", "--json", "--results-dir", str(results),
                               str(model), *PROFILE], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        sessions.append(list_sessions(results)[-1])
    return {"root": root, "results": results, "baseline": sessions[0], "head": sessions[1]}


def check(capsys: pytest.CaptureFixture[str], profiled: dict[str, Any], *argv: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(["check", "--baseline", profiled["baseline"].name, "--results-dir", str(profiled["results"]),
                 "--json", *argv])
    return code, json.loads(capsys.readouterr().out)


def headlines(session: Path) -> list[float]:
    return [run["latency_stats_ms"]["headline"] for run in load_runs(session) if run["status"] == "ok"]


def test_a_model_doing_twice_the_work_fails_the_gate(profiled: dict[str, Any], capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    old, new = headlines(profiled["baseline"]), headlines(profiled["head"])
    assert len(old) == len(new) == 5
    report = profiled["root"] / "report.xml"
    code, result = check(capsys, profiled, "--junit", str(report))
    checks = {c["check"]: c for c in result["checks"]}
    assert code == 1 and checks["runs"]["verdict"] == "pass"
    latency = checks["latency_ms"]
    assert latency["verdict"] == "fail", latency["message"]
    assert (latency["baseline"], latency["value"]) == (pytest.approx(np.median(old)), pytest.approx(np.median(new)))
    assert latency["value"] / latency["baseline"] > 1.5 and latency["p_value"] <= 0.05
    failing = [case for case in ET.parse(report).getroot().iter("testcase") if case.find("failure") is not None]
    assert ("harness.check.net", "latency_ms cpus=1") in [(c.get("classname"), c.get("name")) for c in failing]


def test_the_same_sessions_pass_a_limit_above_the_slowdown(profiled: dict[str, Any],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, result = check(capsys, profiled, "--max-slowdown", "1000%", "--max-memory-growth", "100%")
    latency = next(c for c in result["checks"] if c["check"] == "latency_ms")
    assert code == 0 and result["passed"] and "within --max-slowdown 1000%" in latency["message"]
    assert latency["value"] / latency["baseline"] < 11

