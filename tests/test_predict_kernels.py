"""A probed device's kernel table predicts a graph with no run, through the CLI and from Python: the kernel table is
the predictor that serves the device, every prediction says it carried it, each interval lies above zero around its
prediction, and a probed model's measured latency stands beside its prediction."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import harness
from harness.api.predictors import KernelPredictor
from harness.calibration.least_squares import KERNEL_FACT
from harness.cli import main
from harness.core import metric_registry
from harness.kernels.predictor import fitted_model
from harness.kernels.table import find_kernel_table
from harness.store.results import list_sessions
from harness.zoo import export
from harness.zoo.quantize import quantize
from tests.conftest import make_matmul_model
from tests.helpers import profile_json, session_runs

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
    assert "no model measured end to end" not in err  # its probed models correct the sum
    # but two models give no held-out residuals to measure the interval on: it is the bound, and says so
    assert printed["kws_dscnn"]["pi_high"] == pytest.approx(2 * printed["kws_dscnn"]["predicted"])
    assert f"kernel table {TABLE} holds 2 model(s) measured end to end" in err and "is a bound" in err
    assert list_sessions(probed) == sessions  # nothing was run

    predictor = harness.load_predictor(TABLE, results_dir=probed)
    assert isinstance(predictor, KernelPredictor)
    (again,) = predictor.predict(["kws_dscnn"])
    assert again.predicted == pytest.approx(printed["kws_dscnn"]["predicted"], rel=1e-12)
    assert again.carried_by == f"kernel table {TABLE}" and f"kernel table {TABLE}" in predictor.explain()
    assert predictor.heldout()[0]["fit"] == "kernels"
    with pytest.raises(harness.ConfigError, match="no session and no fit to choose"):
        harness.load_predictor(TABLE, results_dir=probed, fit="ols")


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_a_quantized_graph_is_refused_in_one_line_naming_its_int8_ops(probed: Path, tmp_path: Path, mode: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A table of float32 kernels would read an int8 graph's convolutions as float ones and predict them at float
    time: the prediction is refused, naming the model, its quantized ops and what to do instead."""
    int8 = quantize(shutil.copy(export("resnet8_cifar10"), tmp_path / "resnet8.onnx"), mode)
    capsys.readouterr()
    assert main(["predict", str(int8), "--device", TABLE, "--results-dir", str(probed)]) == 2
    out, err = capsys.readouterr()
    line = err.strip().splitlines()[-1]
    assert f"model {int8.name}: a quantized graph (" in line and "float model" in line and "Traceback" not in err
    assert ("QuantizeLinear" if mode == "static" else "DynamicQuantizeLinear") in line and not out.strip()


def test_a_table_of_designed_kernels_alone_says_its_sum_goes_uncorrected(probed: Path, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """What a phone's exported and imported table holds: the probe's designed kernels, no model run end to end."""
    table = find_kernel_table(TABLE, probed)
    assert table is not None
    folder = tmp_path / "kernels" / "phone-onnxruntime-1t-fp32"
    shutil.copytree(table.path, folder)
    rows = table.rows()
    rows[rows["source"].eq("designed")].to_csv(folder / table.rows_path.name, index=False)
    (folder / "kernel_table.json").write_text(json.dumps({**table.meta, "name": folder.name}))
    capsys.readouterr()
    assert main(["predict", "kws_dscnn", "--device", folder.name, "--results-dir", str(tmp_path), "--json"]) == 0
    out, err = capsys.readouterr()
    (row,) = json.loads(out)["predictions"]
    assert row["fit"] == "kernels" and row["pi_low"] == pytest.approx(row["predicted"] / 2)
    assert row["pi_high"] == pytest.approx(row["predicted"] * 2)
    assert f"kernel table {folder.name} holds no model measured end to end" in err
    assert "as device phone-onnxruntime-1t (harness import-device)" in err


def test_a_device_with_a_kernel_table_has_the_kernels_fit_in_its_nested_choice(
        probed: Path, capsys: pytest.CaptureFixture[str], tiny_onnx: Path, tmp_path: Path) -> None:
    """A device's kernel table (named <device>-fp32, as a probe of the device's board names it) gives the `kernels`
    fit; a model of a family the table holds is predicted by the table without that family."""
    matmul = make_matmul_model(tmp_path / "matmul.onnx", size=192, layers=3)
    models = ["kws_dscnn", "resnet8_cifar10", str(tiny_onnx), str(matmul)]
    profile_json(capsys, probed, *models, "--backend", "local", "--cpus", "1", "--repeats", "2", "--no-report")
    latency = metric_registry.get(metric_registry.LATENCY).value
    measured: dict[str, list[float]] = {}
    for run in session_runs(probed):
        measured.setdefault(run.model_name, []).append(float(latency(run.line)))
    rows = [f"{model},1,{float(np.median(values))!r},x" for model, values in measured.items()]
    device = TABLE.removesuffix("-fp32")
    (tmp_path / "board.csv").write_text("model,threads,latency_ms,family\n" + "\n".join(rows) + "\n")
    assert main(["import-device", str(tmp_path / "board.csv"), "--device", device, "--results-dir", str(probed)]) == 0

    (calibration,) = harness.regress(device, results_dir=probed).calibrations.calibrations
    assert calibration.kernel_table == TABLE
    row = next(r for r in calibration.comparison if r["fit"] == "kernels")
    assert row["note"] == "" and row["within_10pct"] is not None
    points = calibration.points.set_index("model")
    table = find_kernel_table(TABLE, probed)
    assert table is not None
    own = fitted_model(table).predict(export("kws_dscnn"))[0]
    without = fitted_model(table, without="kws_dscnn").predict(export("kws_dscnn"))[0]
    assert points.loc["kws_dscnn", KERNEL_FACT] == pytest.approx(without, rel=1e-12) and without != own
    x, y = np.log(points[KERNEL_FACT].to_numpy(float)), np.log(points["device"].to_numpy(float))
    for i, model in enumerate(points.index):  # each model's held-out prediction: the table's times the others' scale
        keep = np.arange(len(y)) != i
        scale = np.mean(y[keep] - x[keep])
        assert points.loc[model, "loo_kernels"] == pytest.approx(np.exp(scale + x[i]), rel=1e-9)

    capsys.readouterr()
    assert main(["regress", "--device", device, "--fit", "kernels", "--results-dir", str(probed)]) == 0
    assert f"kernel table {TABLE} carrying it" in capsys.readouterr().out.replace("\n", " ")
    assert main(["predict", str(matmul), "--device", device, "--fit", "kernels", "--results-dir", str(probed),
                 "--json"]) == 0
    (printed,) = json.loads(capsys.readouterr().out)["predictions"]
    assert printed["fit"] == "kernels" and printed["kernel_table"] == TABLE
    assert 0 < printed["pi_low"] < printed["predicted"] < printed["pi_high"]
    assert printed["harness"] == pytest.approx(points.loc["matmul", KERNEL_FACT], rel=1e-12)  # what the fit read
    assert printed["harness_figure"].startswith("device's kernel table's prediction")
    check_rank_on_device(probed, capsys, device, set(measured), [str(tiny_onnx), str(matmul)])


def check_rank_on_device(probed: Path, capsys: pytest.CaptureFixture[str], device: str, models: set[str],
                         files: list[str]) -> None:
    """`harness rank --device`: the session's models by the predicted latency `harness predict` gives them, from the
    imported device's chosen fit or from the kernel table's graphs; a tie is with the rank's first model."""
    for name in (device, TABLE):
        capsys.readouterr()
        assert main(["rank", "--device", name, "--results-dir", str(probed), "--json"]) == 0
        ranking = json.loads(capsys.readouterr().out)["ranking"]
        assert {row["model"] for row in ranking} == models
        assert [row["predicted_ms"] for row in ranking] == sorted(row["predicted_ms"] for row in ranking)
        asked = ["kws_dscnn", "resnet8_cifar10", *files] if name == TABLE else sorted(models)  # a table reads graphs
        predicted = {p.model: p for p in harness.predict(asked, name, results_dir=probed).rows
                     if p.metric == metric_registry.LATENCY}
        for row in ranking:
            assert row["predicted_ms"] == pytest.approx(predicted[row["model"]].predicted, rel=1e-9)
            assert (row["carried_by"] == f"kernel table {TABLE}") == bool(predicted[row["model"]].kernel_table)
        for above, below in zip(ranking, ranking[1:], strict=False):
            first = next(r for r in ranking if r["rank"] == above["rank"])
            assert (below["rank"] == above["rank"]) == (below["pi_low_ms"] <= first["pi_high_ms"])
