"""A probed device's kernel table predicts a graph with no run, through the CLI and from Python: the kernel table is
the predictor that serves the device, every prediction says it carried it, each interval lies above zero around its
prediction, and a probed model's measured latency stands beside its prediction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import harness
from harness.api.predictors import KernelPredictor
from harness.cli import main
from harness.kernels.table import find_kernel_table
from harness.store.results import list_sessions

TABLE = "host-onnxruntime-1t-fp32"
PROBE = ("--models", "resnet8_cifar10", "kws_dscnn", "--designed", "12", "--budget-min", "1", "--cpus", "1",
         "--backend", "local")


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = tmp_path_factory.mktemp("probed")
    assert main(["probe", *PROBE, "--results-dir", str(results)]) == 0
    return results


def test_predict_on_a_kernel_table_answers_from_the_graph(probed: Path, capsys: pytest.CaptureFixture[str],
                                                          tiny_onnx: Path) -> None:
    table = find_kernel_table(TABLE, probed)
    assert table is not None
    rows = table.rows()
    measured = float(rows.loc[rows["model"] == "kws_dscnn", "model_latency_ms"].iloc[0])
    sessions = list_sessions(probed)
    capsys.readouterr()
    assert main(["predict", "kws_dscnn", str(tiny_onnx), "--device", TABLE, "--results-dir", str(probed),
                 "--json"]) == 0
    out, err = capsys.readouterr()
    printed = {row["model"]: row for row in json.loads(out)["predictions"]}
    assert set(printed) == {"kws_dscnn", "tiny_mlp"}
    for row in printed.values():
        assert row["fit"] == "kernels" and row["kernel_table"] == TABLE
        assert 0 < row["pi_low"] < row["predicted"] < row["pi_high"] and row["harness"] > 0
    assert printed["kws_dscnn"]["measured_on_device"] == pytest.approx(measured)
    assert printed["tiny_mlp"]["measured_on_device"] is None
    assert f"kernel table {TABLE}:" in err and "predicted from each graph, none run" in err
    assert list_sessions(probed) == sessions  # nothing was run

    predictor = harness.load_predictor(TABLE, results_dir=probed)
    assert isinstance(predictor, KernelPredictor)
    (again,) = predictor.predict(["kws_dscnn"])
    assert again.predicted == pytest.approx(printed["kws_dscnn"]["predicted"], rel=1e-12)
    assert again.carried_by == f"kernel table {TABLE}" and f"kernel table {TABLE}" in predictor.explain()
    assert predictor.heldout()[0]["fit"] == "kernels"
    with pytest.raises(harness.ConfigError, match="no session and no fit to choose"):
        harness.load_predictor(TABLE, results_dir=probed, fit="ols")
