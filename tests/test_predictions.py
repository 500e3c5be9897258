"""Predictions as one typed record (harness.calibration.prediction.Prediction), from the CLI and from Python."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import harness
from harness.calibration.calibrate import calibrate_points
from harness.calibration.prediction import MAX_SPREAD
from harness.cli import main
from harness.core.errors import DataError
from harness.device.library import shipped_tables
from tests.analysis_fixtures import write_session

CELLS = ("nb201_5", "nb201_77")


def test_cells_on_a_library_table_through_the_cli_as_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    """`harness predict nb201_5 --device nb201-raspi4` (which once crashed on a row without `outside`): the table and
    the JSON carry the numbers harness.predict gives, each within its interval of the table's own measurement."""
    expected = {p.model: p for p in harness.predict(list(CELLS), device="nb201-raspi4").rows}
    assert main(["predict", *CELLS, "--device", "nb201-raspi4", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    rows = {row["model"]: row for row in printed["predictions"]}
    measured = next(t for t in shipped_tables() if t.name == "nb201-raspi4").values
    for cell in CELLS:
        row, prediction = rows[cell], expected[cell]
        assert row["predicted"] == pytest.approx(prediction.predicted, rel=1e-12)
        assert row["harness_figure"] == "static MACs" and row["device"] == "nb201-raspi4"
        assert row["pi_low"] < measured[cell] < row["pi_high"]
        assert abs(row["predicted"] - measured[cell]) / measured[cell] < 0.1
    assert main(["predict", *CELLS, "--device", "nb201-raspi4"]) == 0
    table = capsys.readouterr().out
    for cell in CELLS:
        line = next(line for line in table.splitlines() if f" {cell} " in line)
        assert f"{expected[cell].predicted:.4g}" in line and "inside" in line


THREE = {"mobilenet_v1_0.25_128": (0.94, 2.1), "mobilenet_v1_0.25_224": (2.81, 5.9), "squeezenet1_1": (35.5, 30.5)}
"""The three built-in examples: their harness latency (ms) on a loaded 2-core host, and a device's."""


def test_three_models_give_an_interval_above_zero_or_say_the_fit_cannot_bound_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three models leave a line one degree of freedom: `ols` and `relative` once printed [-10.3, 15.6] and
    [-55.2, 120.3]. Now every interval printed is above zero and within ×MAX_SPREAD of its prediction, and a fit that
    cannot bound the model says so in one line."""
    results = tmp_path / "results"
    write_session(results, {**{m: [h] * 3 for m, (h, _) in THREE.items()}, "new_net": [10.0] * 3})
    csv = tmp_path / "three.csv"
    csv.write_text("model,latency_ms\n" + "".join(f"{m},{d}\n" for m, (_, d) in THREE.items()))
    assert main(["import-device", str(csv), "--device", "three", "--results-dir", str(results)]) == 0
    capsys.readouterr()
    outcome = {}
    for fit in ("auto", "ols", "relative", "loglog"):
        code = main(["predict", "new_net", "mobilenet_v1_0.25_128", "--device", "three", "--fit", fit,
                     "--results-dir", str(results), "--json"])
        out, err = capsys.readouterr()
        if code:
            assert len(err.strip().splitlines()) == 1 and "cannot bound it from these 3 models" in err
            outcome[fit] = "refused"
            continue
        rows = json.loads(out)["predictions"]
        for row in rows:
            if row["predicted"] is None:
                assert "cannot bound it from these 3 models" in row["note"]
                continue
            assert 0 < row["pi_low"] < row["predicted"] < row["pi_high"]
            assert row["pi_high"] / row["predicted"] <= MAX_SPREAD and row["predicted"] / row["pi_low"] <= MAX_SPREAD
        outcome[fit] = {row["model"] for row in rows if row["predicted"] is not None}
    # ols bounds new_net (10 ms, amid the three) but not the smallest model, whose interval spans ×3000 either side.
    both = {"new_net", "mobilenet_v1_0.25_128"}
    assert outcome == {"auto": both, "loglog": both, "ols": {"new_net"}, "relative": "refused"}


POSITIVE = st.floats(0.05, 500.0, allow_nan=False, allow_infinity=False)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # numpy's overflow warnings reach a user's terminal
@settings(max_examples=200, deadline=None)
@given(models=st.lists(st.tuples(POSITIVE, POSITIVE, POSITIVE, POSITIVE), min_size=2, max_size=6,
                       unique_by=lambda m: round(m[0], 6)),
       new=st.lists(st.tuples(POSITIVE, POSITIVE, POSITIVE), min_size=1, max_size=4),
       fit=st.sampled_from(("auto", "ols", "relative", "loglog", "features")))
def test_no_interval_of_a_small_random_device_reaches_zero_or_beyond_reason(
        models: list[tuple[float, float, float, float]], new: list[tuple[float, float, float]], fit: str) -> None:
    """2 to 6 models with random positive harness values, device values and static facts, every fit: each prediction
    is either refused with a note, or above zero with a finite interval within ×MAX_SPREAD of it; a device that
    cannot be fitted at all says so in one line, and no numpy warning is printed on the way."""
    harness_ms, device_ms, macs, params = (list(column) for column in zip(*models, strict=True))
    points = pd.DataFrame({"model": [f"m{i}" for i in range(len(models))], "harness": harness_ms,
                           "device": device_ms, "macs": macs, "params": params})
    try:
        calibration = calibrate_points("latency_ms", {"cpus": 1.0}, points, fit=fit, figures=False)
    except DataError as err:
        assert "\n" not in str(err)
        return
    probe = pd.DataFrame({"macs": [n[1] for n in new], "params": [n[2] for n in new]})
    design = calibration.design([n[0] for n in new], probe, [f"n{i}" for i in range(len(new))])
    for p in calibration.predict(design, [f"n{i}" for i in range(len(new))]):
        if p.predicted is None or p.pi_low is None or p.pi_high is None:
            assert p.note and p.pi_low is None and p.pi_high is None
            continue
        assert 0 < p.pi_low <= p.predicted <= p.pi_high < math.inf
        assert p.pi_high / p.predicted <= MAX_SPREAD and p.predicted / p.pi_low <= MAX_SPREAD


def test_the_cell_path_honours_fit_library_and_metric_and_refuses_what_it_does_not_take(tmp_path: Path) -> None:
    """harness.predict([5, 77], device="nb201-raspi4", fit=...) once returned the rows of the call without it."""
    default = harness.predict([5, 77], device="nb201-raspi4", results_dir=tmp_path).rows
    forced = harness.predict([5, 77], device="nb201-raspi4", fit="library", results_dir=tmp_path).rows
    assert {p.fit for p in default} == {"loglog"} and {p.fit for p in forced} == {"library"}
    assert [round(p.predicted or 0, 2) for p in default] == [25.56, 39.71]
    assert [round(p.predicted or 0, 2) for p in forced] == [23.11, 37.8] and forced[0].library_devices
    with pytest.raises(harness.DataError, match="--fit library: .*needs a library device"):
        harness.predict([5, 77], device="nb201-raspi4", fit="library", library=False, results_dir=tmp_path)
    with pytest.raises(harness.ConfigError, match="metric='peak_memory_mib': cells are predicted for latency_ms"):
        harness.predict([5], device="nb201-raspi4", metric="peak_memory_mib")
    with pytest.raises(harness.ConfigError, match="session=...: CellsPredictor .* takes: measured, fit, library"):
        harness.load_predictor("nb201-raspi4", session="all")
    predictor = harness.load_predictor("nb201-raspi4", fit="library")
    (figures,) = predictor.heldout()
    assert figures["fit"] == "library" and figures["models"] == 10 and 0 <= figures["within_10pct"] <= 1
    assert predictor.explain().startswith("latency_ms cpus=1: the library fit (device = ")
    assert "library devices carrying it: nb201-" in predictor.explain()
    assert [p.predicted for p in predictor.predict([5, 77])] == [p.predicted for p in forced]


def test_predict_takes_what_profile_and_rank_take(tmp_path: Path) -> None:
    """session=<Session> (once a raw TypeError) and a model file profile() took (once refused with CLI advice)."""
    results = tmp_path / "results"
    harness_ms = {"net_a": 1.0, "net_b": 2.0, "net_c": 4.0, "net_d": 7.0, "mobilenet_v1_0.25_128": 3.0}
    folder = write_session(results, {model: [value] * 3 for model, value in harness_ms.items()})
    csv = tmp_path / "board.csv"
    csv.write_text("model,latency_ms\n" + "".join(f"{m},{2 * v + 1}\n" for m, v in harness_ms.items()
                                                  if m.startswith("net_")))
    assert main(["import-device", str(csv), "--device", "board", "--results-dir", str(results)]) == 0
    session = harness.Session(folder)
    file = Path(__file__).resolve().parents[1] / "examples" / "models" / "mobilenet_v1_0.25_128.onnx"
    (by_file,) = harness.predict([str(file)], device="board", session=session, library=False).rows
    (by_name,) = harness.predict(["mobilenet_v1_0.25_128"], device="board", results_dir=results, library=False).rows
    assert by_file.model == "mobilenet_v1_0.25_128" and by_file.predicted == by_name.predicted
    assert by_file.predicted == pytest.approx(2 * 3.0 + 1, rel=1e-6)
    (by_folder,) = harness.predict(["mobilenet_v1_0.25_128"], device="board", session=folder, library=False).rows
    assert by_folder.predicted == by_name.predicted
    with pytest.raises(harness.DataError, match=r'profile them first \(harness.profile\) or predict from every '
                                                r'session \(session="all"\)') as refused:
        harness.predict(["net_z"], device="board", session=session)
    assert "--session" not in str(refused.value)


def test_a_renamed_zoo_model_is_the_zoo_model_on_an_imported_device(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The zoo's mobilenet_v1_0.25_224 profiled as my_net.onnx (names and weights changed), on a device whose CSV
    names the zoo model: its graph matches it to that row, so it calibrates as the zoo model would, its family is
    the zoo's, and its "measured" value is the row's (5.9 ms), from Python and the CLI."""
    pytest.importorskip("torch")
    from harness.models.resolve import resolve_model
    from tests.helpers import disguised_copy

    mine = disguised_copy(resolve_model("mobilenet_v1_0.25_224", check_runtime=False).path, tmp_path / "my_net.onnx")
    results = tmp_path / "results"
    harness_ms = {"mobilenet_v1_0.25_128": 0.94, "mobilenet_v1_0.5_128": 1.6, "squeezenet1_1": 35.5, "my_net": 2.81}
    write_session(results, {model: [value] * 3 for model, value in harness_ms.items()}, files={"my_net": mine})
    device_ms = {"mobilenet_v1_0.25_128": 2.1, "mobilenet_v1_0.5_128": 3.4, "squeezenet1_1": 30.5,
                 "mobilenet_v1_0.25_224": 5.9}
    csv = tmp_path / "phone.csv"
    csv.write_text("model,latency_ms\n" + "".join(f"{m},{v}\n" for m, v in device_ms.items()))
    assert main(["import-device", str(csv), "--device", "phone", "--results-dir", str(results)]) == 0
    predictor = harness.load_predictor("phone", results_dir=results, library=False)
    assert len(predictor.calibrations.calibrations[0].points) == 4
    (row,) = predictor.predict(["my_net"])
    assert row.measured_on_device == 5.9 and not any("family" in why for why in row.outside)
    capsys.readouterr()
    assert main(["predict", "my_net", "--device", "phone", "--results-dir", str(results), "--json"]) == 0
    (printed,) = json.loads(capsys.readouterr().out)["predictions"]
    assert printed["measured_on_device"] == 5.9 and printed["predicted"] == pytest.approx(row.predicted)


def test_a_session_named_for_a_library_table_is_refused_with_what_to_do(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """SESSION= once went unheard on a zero-shot prediction; now it is one line saying why and what to do, before
    anything is profiled."""
    code = main(["predict", "mobilenet_v1_0.25_128", "--device", "pixel2-float-1t", "--session", "latest",
                 "--results-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "session=...: ZeroShotPredictor" in err and "leave SESSION / --session unset" in err
    assert not (tmp_path / "zero-shot").exists()
