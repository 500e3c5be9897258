"""Experiment-size per-op checks (slow): the zoo's MobileNetV2 1.0/224 at CPUS=1 and CPUS=2, through the local
backend and through Docker: every Conv node of the graph in the table with its MACs, and a per-op sum that
covers at least 80% of the measured latency or a coverage line that states the gap and its cause."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.models.facts import node_facts
from harness.store.results import list_sessions, load_runs
from tests.test_docker import backend  # noqa: F401 - the fixture: Docker engine and an image of this checkout
from tests.test_per_op import check_conv_rows
from tests.zoo_support import zoo_cache  # noqa: F401 - fixture

MODEL = "mobilenet_v2_1.0_224"
ARGS = ("--per-op", "--repeats", "2", "--iterations", "40", "--warmup", "5", "--cpus", "1,2", "--no-report")


def sweep_and_check(results: Path, backend_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", MODEL, "--backend", backend_name, "--results-dir", str(results), "--json", *ARGS]) == 0
    runs = load_runs(list_sessions(results)[-1])
    assert {r["status"] for r in runs} == {"ok"} and {r["backend"] for r in runs} == {backend_name}
    model_path = Path(runs[0]["model_path"])
    capsys.readouterr()
    assert main(["ops", MODEL, "--results-dir", str(results), "--json"]) == 0
    tables = json.loads(capsys.readouterr().out)["tables"]
    assert sorted(t["cpus"] for t in tables) == [1.0, 2.0]
    convs = [f for f in node_facts(model_path) if f["op_type"] == "Conv"]
    assert len(convs) == 52
    for table in tables:
        check_conv_rows(table["ops"], model_path)
        coverage = table["coverage"]
        assert coverage["coverage"] >= 0.8 or coverage["line"].startswith("below 80%, mostly "), coverage["line"]


@pytest.mark.slow
@pytest.mark.usefixtures("zoo_cache")
def test_mobilenet_v2_per_op_local(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep_and_check(tmp_path, "local", capsys)


@pytest.mark.slow
@pytest.mark.usefixtures("zoo_cache", "backend")
def test_mobilenet_v2_per_op_docker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep_and_check(tmp_path, "docker", capsys)
