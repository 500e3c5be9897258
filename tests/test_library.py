"""The device library and transfer calibration: the shipped tables with their provenance, a target's own rows never in
its library, a novel model removed from every table, an exact multiple recovered, nothing changed without a library,
and zero-shot prediction end to end on a small library table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.calibration.calibrate import calibrate_points
from harness.calibration.fits import FIT_NAMES
from harness.calibration.transfer import Library, column, device_library
from harness.cli import main
from harness.core.errors import ConfigError, DataError
from harness.device.library import all_tables, shipped_tables
from tests.helpers import disguised_copy

ROOT = Path(__file__).resolve().parent.parent
NCNN_DEVICES = ("rpi4b", "jetson-nano-cpu", "sd835-big", "kirin970-big", "rk3588-big", "celeron-n5105")


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_library_lists_the_shipped_tables_with_provenance(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "devices", "--json", "--results-dir", str(tmp_path))
    assert code == 0, err
    tables = {row["name"]: row for row in json.loads(out)["tables"]}
    for device in NCNN_DEVICES:
        for threads in (1, 4):
            row = tables[f"ncnn-{device}-{threads}t"]
            assert (row["engine"], row["threads"], row["precision"], row["role"]) == ("ncnn", threads, "fp32", "score")
            assert row["models"] == 13 and row["date"][:2] == "20" and "ncnn" in row["source"]
    assert {name for name, row in tables.items() if row["role"] == "learn"} == {
        "nb201-titan-rtx-1", "nb201-titanx-1", "nb201-1080ti-1", "nb201-2080ti-1"}
    assert all(tables[f"nb201-{d}"]["models"] == 15625 for d in ("pixel2", "raspi4", "gold-6226", "fpga"))
    assert tables["pixel3-int8-4t"]["precision"] == "int8" and tables["pixel3-int8-4t"]["models"] == 21
    code, out, err = run_cli(capsys, "devices", "show", "ncnn-rpi4b-4t", "--results-dir", str(tmp_path))
    assert code == 0, err
    assert "device: rpi4b" in out and "resnet50" in out and "547.1" in out
    # An imported device joins the library only when asked, named by its import, and can leave it.
    csv = tmp_path / "mine.csv"
    csv.write_text("model,latency_ms\nsqueezenet1_1,30\nresnet18,60\n")
    code, out, err = run_cli(capsys, "import-device", str(csv), "--device", "my-board", "--results-dir", str(tmp_path))
    assert code == 0 and "device library: my-board is not in it" in out
    listed = json.loads(run_cli(capsys, "devices", "--json", "--results-dir", str(tmp_path))[1])
    assert "my-board" not in {row["name"] for row in listed["tables"]}
    assert listed["imported_outside_the_library"] == ["my-board"]
    assert run_cli(capsys, "devices", "join", "my-board", "--results-dir", str(tmp_path))[0] == 0
    code, out, err = run_cli(capsys, "devices", "--json", "--results-dir", str(tmp_path))
    mine = next(row for row in json.loads(out)["tables"] if row["name"] == "my-board")
    assert (mine["origin"], mine["models"]) == ("imported", 2)
    assert run_cli(capsys, "devices", "leave", "my-board", "--results-dir", str(tmp_path))[0] == 0
    assert "my-board" not in {t.name for t in all_tables(tmp_path)}
    code, out, err = run_cli(capsys, "import-device", str(csv), "--device", "my-board", "--library", "--results-dir",
                             str(tmp_path))
    assert code == 0 and "device library: my-board is in it" in out
    assert "my-board" in {t.name for t in all_tables(tmp_path)}
    code, out, err = run_cli(capsys, "devices", "show", "no-such-device", "--results-dir", str(tmp_path))
    assert code == 2 and "no library device or kernel table 'no-such-device'" in err
    assert len(err.strip().splitlines()) == 1


def test_the_presets_name_library_tables_that_exist() -> None:
    names = {table.name for table in shipped_tables()}
    named = {}
    for preset in sorted((ROOT / "devices").glob("*.env")):
        for line in preset.read_text().splitlines():
            if line.startswith("# Library tables of this device: "):
                listed = line.removeprefix("# Library tables of this device: ").split(" (")[0]
                named[preset.name] = [name.strip() for name in listed.split(",")]
    assert set(named) == {"raspberry-pi-4.env", "jetson-nano.env", "pixel-3.env", "galaxy-s8.env"}
    assert all(set(tables) <= names for tables in named.values()), named


def test_a_targets_rows_never_reach_its_own_library() -> None:
    """Every shipped table as a target: no table of its physical device is in its library, and no evidence column
    equals any of its own device's tables on the models they share (a leak would make a column an exact copy)."""
    tables = shipped_tables()
    csv_tables = [t for t in tables if not t.column]
    models = sorted({name for t in csv_tables for name in t.values.index} | {f"nb201_{i}" for i in range(50)})
    harness = pd.Series(np.linspace(1, 40, len(models)), index=models)
    for target in tables:
        library = Library.for_target(tables, target.name)
        assert target.device not in {t.device for t in library.tables}, target.name
        own = Library(tuple(t for t in tables if t.device == target.device)).measured(models)
        evidence = library.evidence(harness)
        for name in evidence:
            for mine in own:
                shared = own[mine].notna()
                if shared.sum() >= 3:
                    assert not np.allclose(evidence.loc[shared, name], own.loc[shared, mine]), (target.name, name)


def test_a_novel_model_is_removed_from_every_library_table() -> None:
    """Without a model, every table that measured it gives instead its power law of the harness value, fitted on the
    other models: the measured value is gone from every column."""
    tables = [t for t in shipped_tables() if t.name.startswith("ncnn-") and not t.name.startswith("ncnn-rpi4b")]
    library = Library(tuple(tables))
    models = ["squeezenet1_1", "mobilenet_v1_1.0_224", "mobilenet_v2_1.0_224", "resnet18", "resnet50", "alexnet"]
    harness = pd.Series([5.0, 20.0, 14.0, 30.0, 70.0, 25.0], index=models)
    measured = library.measured(models)
    assert measured.notna().all().all()
    novel = library.evidence(harness, without="resnet18")
    for table in tables:
        name = column(table)
        others = [m for m in models if m != "resnet18"]
        slope, intercept = np.polyfit(np.log(harness[others]), np.log(measured.loc[others, name]), 1)
        assert novel.loc["resnet18", name] == pytest.approx(np.exp(intercept + slope * np.log(30.0)))
        assert novel.loc["resnet18", name] != pytest.approx(measured.loc["resnet18", name])
        pd.testing.assert_series_equal(novel.loc[others, name], measured.loc[others, name])


def _points(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    harness = np.exp(rng.uniform(0, 4, n))
    names = [f"net_{i}" for i in range(n)]
    return pd.DataFrame({"model": names, "harness_model": names, "harness": harness,
                         "device": 2.0 * harness**0.8 * np.exp(rng.normal(0, 0.3, n)), "family": names})


def test_one_library_device_that_is_an_exact_multiple_of_the_target_is_recovered_exactly() -> None:
    points = _points(12, 1)
    other = points["device"] / 3.0  # another device, three times faster on every model
    calibration = calibrate_points("latency_ms", {}, points.assign(**{"library:other": other}))
    assert calibration.model.name == "library"
    np.testing.assert_allclose(calibration.points["fitted"], calibration.points["device"], rtol=1e-8)
    np.testing.assert_allclose(calibration.points["loo_predicted"], calibration.points["device"], rtol=1e-8)
    assert calibration.library_devices()[0]["device"] == "other"
    assert calibration.library_devices()[0]["exponent"] == pytest.approx(1.0)
    assert calibration.stats["loo_within_10pct"] == 1.0


def test_with_no_library_the_results_equal_todays() -> None:
    """No library table shares a model with these points: no evidence, no `library` fit, every figure as before."""
    points = _points(12, 2)
    before = calibrate_points("latency_ms", {}, points)
    library = Library(tuple(t for t in shipped_tables() if t.column))  # NAS-Bench-201 cells only
    evidence = library.evidence(points.set_index("harness_model")["harness"])
    assert evidence.empty or evidence.isna().all().all() or not len(evidence.columns)
    after = calibrate_points("latency_ms", {}, points.join(evidence, on="harness_model"),
                             novel=lambda model: library.evidence(points.set_index("harness_model")["harness"], model))
    assert after.model.equation == before.model.equation
    assert after.comparison == before.comparison
    assert all(row.get("within_10pct_novel") == row.get("within_10pct") for row in after.comparison)
    assert [row["fit"] for row in before.comparison] == [*FIT_NAMES, "auto"]


def small_catalog(folder: Path) -> Path:
    """A library of two small tables (tiny: four zoo models; other: five) in `folder`, as HARNESS_LIBRARY_CATALOG."""
    table = folder / "tiny.csv"
    table.write_text("# a small device table\nmodel,threads,latency_ms\nmobilenet_v1_0.25_128,1,3.0\n"
                     "mobilenet_v1_0.25_224,1,8.4\nsqueezenet1_1,1,31.0\nmobilenet_v1_0.5_128,1,7.9\n")
    other = folder / "other.csv"
    other.write_text("model,threads,latency_ms\nmobilenet_v1_0.25_128,1,1.5\nmobilenet_v1_0.25_224,1,4.1\n"
                     "squeezenet1_1,1,16.0\nmobilenet_v1_0.5_128,1,4.2\nmobilenet_v1_0.5_160,1,6.3\n")
    catalog = folder / "library.csv"
    catalog.write_text("name,device,file,column,source,engine,threads,precision,date,role\n"
                       f"tiny,tiny-board,{table},,a test,onnxruntime,1,fp32,2026,score\n"
                       f"other,other-board,{other},,a test,onnxruntime,1,fp32,2026,score\n")
    return catalog


def test_zero_shot_prediction_on_a_small_library_table(tmp_path: Path) -> None:
    """A user with no device data names a library table: its models are profiled on this host, the table calibrates,
    the other tables are its library, and the user's model is predicted with an interval and the table's error."""
    pytest.importorskip("torch")
    env = {**os.environ, "HARNESS_LIBRARY_CATALOG": str(small_catalog(tmp_path)), "HARNESS_SET_BACKEND": "local"}
    results = tmp_path / "results"
    argv = [sys.executable, "-m", "harness.cli", "predict", "mobilenet_v1_0.5_160", "--device", "tiny",
            "--results-dir", str(results), "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert done.returncode == 0, done.stderr
    (prediction,) = json.loads(done.stdout)["predictions"]
    assert prediction["model"] == "mobilenet_v1_0.5_160" and prediction["measured_on_device"] is None
    assert 0 < prediction["pi_low"] < prediction["predicted"] < prediction["pi_high"]
    # What the tables imply: the other board's 6.3 ms, times tiny's geometric-mean ratio to it on the four models
    # both hold (3.0/1.5, 8.4/4.1, 31/16, 7.9/4.2: about 1.97), about 12.4 ms; the prediction within its half-width.
    implied = 6.3 * float(np.exp(np.mean(np.log([3.0 / 1.5, 8.4 / 4.1, 31.0 / 16.0, 7.9 / 4.2]))))
    half_width = (prediction["pi_high"] - prediction["pi_low"]) / 2
    assert abs(prediction["predicted"] - implied) <= half_width
    assert "held out on tiny (each of its 4 models predicted from the others" in done.stderr
    # A second call profiles nothing: the sessions under RESULTS_DIR/zero-shot hold every model.
    sessions = sorted((results / "zero-shot").glob("*/*"))
    again = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert again.returncode == 0, again.stderr
    assert sorted((results / "zero-shot").glob("*/*")) == sessions
    assert json.loads(again.stdout)["predictions"][0]["predicted"] == pytest.approx(prediction["predicted"])


def test_zero_shot_sessions_are_kept_apart_by_what_makes_sessions_differ() -> None:
    """The engine, DIMS and the limits each give their own folder under zero-shot/; REPEATS (more of the same runs)
    does not."""
    from harness.api.preparing import ZERO_SHOT_SETTINGS, conditions_key
    from harness.api.profiling import device_profile

    def key(**settings: object) -> str:
        return conditions_key(device_profile(None, {**ZERO_SHOT_SETTINGS, "backend": "local", **settings})[0])

    assert key() == key(repeats=9) and key().startswith("onnxruntime-") and key(runtime="ncnn").startswith("ncnn-")
    keys = [key(), key(runtime="ncnn"), key(dims="seq=128"), key(memory="1g"), key(iterations=31), key(cpus=2)]
    assert len(set(keys)) == len(keys)


def test_a_dims_model_then_a_plain_one_predict_zero_shot_in_one_results_dir(tmp_path: Path) -> None:
    """`make predict MODEL=bert_mini DIMS="seq=128"`, then a plain model, in one RESULTS_DIR: the DIMS session is
    refused by nothing (not by itself, as when DIMS was compared across models), and the plain model is profiled in
    its own conditions' folder, not refused by the DIMS session's."""
    pytest.importorskip("torch")
    env = {**os.environ, "HARNESS_LIBRARY_CATALOG": str(small_catalog(tmp_path)), "HARNESS_SET_BACKEND": "local"}
    results = tmp_path / "results"
    for model, dims in (("bert_mini", "seq=128"), ("mobilenet_v1_0.5_160", "")):
        done = subprocess.run([sys.executable, "-m", "harness.cli", "predict", model, "--device", "tiny",
                               "--results-dir", str(results), "--json"], capture_output=True, text=True,
                              env={**env, "HARNESS_SET_DIMS": dims}, cwd=ROOT, timeout=900)
        assert done.returncode == 0, done.stderr
        (prediction,) = json.loads(done.stdout)["predictions"]
        assert prediction["model"] == model and 0 < prediction["pi_low"] < prediction["predicted"]
    folders = sorted((results / "zero-shot").iterdir())
    assert len(folders) == 2 and all(folder.name.startswith("onnxruntime-") for folder in folders)
    dims = {folder.name: {(run["model_name"], run["conditions"]["dims"]) for path in folder.glob("*/runs.jsonl")
                          for run in map(json.loads, path.read_text().splitlines())} for folder in folders}
    assert sorted(len(pairs) for pairs in dims.values()) == [5, 5]  # the table's four models and the user's, each
    assert {("bert_mini", "seq=128"), ("mobilenet_v1_0.5_160", None)} <= set().union(*dims.values())


def test_a_renamed_zoo_model_is_the_zoo_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The zoo's mobilenet_v1_0.25_224 saved as my_net.onnx, its weights and names changed: its graph, not its file
    name, says what it is, so zero-shot gives it the zoo model's family, library match, prediction and the table's
    measured value (8.4 ms), through the CLI and from Python, and profiles it no second time."""
    pytest.importorskip("torch")
    import harness
    from harness.models.identity import graph_fingerprint
    from harness.models.resolve import resolve_model

    zoo_file = resolve_model("mobilenet_v1_0.25_224", check_runtime=False).path
    mine = disguised_copy(zoo_file, tmp_path / "my_net.onnx")
    assert graph_fingerprint(mine) == graph_fingerprint(zoo_file) != graph_fingerprint(
        resolve_model("mobilenet_v1_0.25_128", check_runtime=False).path)
    catalog, results = small_catalog(tmp_path), tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "harness.cli", "predict", str(mine), "--device", "tiny",
                           "--results-dir", str(results), "--json"], capture_output=True, text=True,
                          env={**os.environ, "HARNESS_LIBRARY_CATALOG": str(catalog), "HARNESS_SET_BACKEND": "local"},
                          cwd=ROOT, timeout=900)
    assert done.returncode == 0, done.stderr
    (as_mine,) = json.loads(done.stdout)["predictions"]
    assert as_mine["model"] == "mobilenet_v1_0.25_224"
    assert as_mine["measured_on_device"] == 8.4 and not any("family" in why for why in as_mine["outside"])
    assert f"{mine}: the graph of the zoo's mobilenet_v1_0.25_224 (weights aside)" in done.stderr
    profiled = {json.loads(line)["model_name"] for path in results.glob("zero-shot/*/*/runs.jsonl")
                for line in path.read_text().splitlines()}
    assert profiled == {"mobilenet_v1_0.25_128", "mobilenet_v1_0.25_224", "squeezenet1_1", "mobilenet_v1_0.5_128"}

    monkeypatch.setenv("HARNESS_LIBRARY_CATALOG", str(catalog))
    monkeypatch.setenv("HARNESS_SET_BACKEND", "local")
    for asked in (str(mine), "mobilenet_v1_0.25_224"):
        (python,) = harness.predict(asked, device="tiny", results_dir=results).rows
        assert (python.model, python.measured_on_device) == ("mobilenet_v1_0.25_224", 8.4)
        assert python.predicted == pytest.approx(as_mine["predicted"], rel=1e-12)


def test_a_table_of_an_engine_that_cannot_run_the_model_says_so(tmp_path: Path) -> None:
    """A token model (int64 input_ids) on a table whose latencies are ncnn's: one line naming the engine and the
    input, no prediction, nothing profiled."""
    from tests.token_models import make_encoder

    encoder = make_encoder(tmp_path / "encoder.onnx")
    catalog = small_catalog(tmp_path)
    catalog.write_text(catalog.read_text().replace("a test,onnxruntime", "a test,ncnn"))
    results = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "harness.cli", "predict", str(encoder), "--device", "tiny",
                           "--results-dir", str(results), "--json"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HARNESS_LIBRARY_CATALOG": str(catalog), "HARNESS_SET_DIMS": "seq=16"},
                          cwd=ROOT)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1 and "--device tiny: its latencies are ncnn's, which cannot run encoder " \
        "(input 'input_ids' is int64; ncnn runs float32 inputs only)" in done.stderr
    assert not (results / "zero-shot").exists()


def test_an_imported_device_named_like_a_shipped_table_is_one_line(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "mine.csv"
    csv.write_text("model,latency_ms\nsqueezenet1_1,30\n")
    code, _, err = run_cli(capsys, "import-device", str(csv), "--device", "ncnn-rpi4b-1t", "--results-dir",
                           str(tmp_path))
    assert code == 0, err
    with pytest.raises(DataError, match="has the name of a shipped library table"):
        all_tables(tmp_path)
    code, _, err = run_cli(capsys, "devices", "--results-dir", str(tmp_path))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "import it again under another --device name" in err


def test_the_nas_loop_predictor_equals_predict_on_the_same_inputs() -> None:
    """Cells predicted from arrays (a search loop's path) give what `predict` gives model by model, for cells as
    indices, names and cell strings; a cell's MACs are its graph's, from the closed form."""
    from harness.calibration.nas import CellPredictor, cell_macs
    from harness.device.library import METRIC
    from harness.models.facts import onnx_facts
    from harness.zoo import export
    from harness.zoo.nb201_cells import cell_ops, cell_string

    latency = pd.read_csv(ROOT / "devices" / "library" / "nb201_latency_ms.csv", comment="#",
                          index_col="arch_idx")["pixel2"]
    measured = {int(i): float(latency[i]) for i in (11982, 431, 55, 9, 14451, 8636, 9881, 13479, 6196, 1462, 3, 77,
                                                    150, 420, 610, 700, 810, 860, 35, 299)}
    predictor = CellPredictor.fit(measured, device="nb201-pixel2")
    assert "nb201-pixel2" not in {d["device"] for d in predictor.calibration.library_devices()}
    cells = list(range(900, 960))
    fast = predictor.intervals(cells)
    slow = predictor.cset.predict({METRIC: predictor.values}, [f"nb201_{i}" for i in cells])
    for array, key in ((fast.predicted, "predicted"), (fast.low, "pi_low"), (fast.high, "pi_high")):
        np.testing.assert_allclose(array, [getattr(p, key) for p in slow], rtol=1e-12)
    assert predictor.predict(cells) == slow
    as_strings = predictor.intervals([cell_string(cell_ops(i)) for i in cells])
    as_names = predictor.intervals([f"nb201_{i}" for i in cells])
    np.testing.assert_array_equal(as_strings.predicted, fast.predicted)
    np.testing.assert_array_equal(as_names.predicted, fast.predicted)
    for index in (0, 1, 900):
        assert cell_macs(cell_ops(index)) == onnx_facts(export(f"nb201_{index}"))["macs"]
    with pytest.raises(ConfigError, match="not a NAS-Bench-201 index"):
        predictor.predict(["conv"])


def test_one_devices_data_under_two_names_is_no_evidence_for_itself(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The same phone imported twice, both in the library: neither is evidence for the other (that made each carry
    the other at r 1.00, with every held-out prediction right); a table of other latencies still is."""
    rows = {"squeezenet1_1": 30.0, "resnet18": 60.0, "mobilenet_v2_1.0_224": 25.0, "resnet50": 140.0}
    for name, scale in (("my-phone", 1.0), ("my-phone-again", 1.0), ("other-phone", 1.7)):
        csv = tmp_path / f"{name}.csv"
        csv.write_text("model,latency_ms\n" + "".join(f"{m},{v * scale}\n" for m, v in rows.items()))
        assert run_cli(capsys, "import-device", str(csv), "--device", name, "--library", "--results-dir",
                       str(tmp_path))[0] == 0
    for target, twin in (("my-phone", "my-phone-again"), ("my-phone-again", "my-phone")):
        library = device_library(tmp_path, target)
        assert twin not in library.names and library.refused == (twin,)
        assert "other-phone" in library.names
        assert f"not learned from: {twin}, whose latencies are {target}'s own" in library.refused_note(target)
    assert device_library(tmp_path, "other-phone").refused == ()
