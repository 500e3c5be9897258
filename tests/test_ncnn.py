"""RUNTIME=ncnn: real pnnx conversions and real ncnn runs in real cgroups, on tiny models (the nb201 zoo family builds
ONNX without torch; the others are built here with onnx.helper)."""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.analysis.run_values import harness_values
from harness.cli import main
from harness.core.conditions import pooling_conflict
from harness.core.errors import ModelError
from harness.kernels.ncnn_layers import converted_join
from harness.models.ncnn_convert import MISSING_EXTRA, converter_version
from harness.models.resolve import resolve_model, sha256_of
from harness.store.results import SCHEMA_VERSION, iter_all_runs, load_runs
from tests.conftest import make_hardmax_model, make_matmul_model
from tests.helpers import entry, profile_json, session_runs

pytest.importorskip("ncnn", reason="the ncnn extra is not installed (make test installs it)")
QUICK = ("--backend", "local", "--repeats", "2", "--iterations", "20", "--warmup", "2", "--cpus", "1")


@pytest.fixture(scope="module", autouse=True)
def conversion_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One conversion cache for the module: a model converted by one test is found converted by the next."""
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HARNESS_CACHE_DIR", str(cache))
        yield cache / "ncnn"


def test_a_zoo_model_runs_on_ncnn_with_latency_and_the_kernels_peak(capsys, tmp_path: Path,
                                                                    conversion_cache: Path) -> None:
    summary = profile_json(capsys, tmp_path, "nb201_0", "--runtime", "ncnn", *QUICK)
    runs = session_runs(tmp_path)
    assert [r["status"] for r in runs] == ["ok", "ok"]
    for run in runs:
        assert run["latency_stats_ms"]["n"] == 20 and run["latency_stats_ms"]["headline"] > 0
        assert run["peak_source"] == "kernel" and run["peak_memory_mib"] > 10 and run["load_s"] > 0
        assert run["metrics"]["engine"] == "ncnn" and run["metrics"]["threads"] == 1
        assert run["metrics"]["input_shapes"] == "in0=3x32x32"  # the ONNX input's shape, batch dropped
        assert run["model_kind"] == "ncnn" and run["model_path"].endswith(".onnx")  # the model is the ONNX file
        assert run["model_sha256"] == sha256_of(Path(run["model_path"]))
        assert run["conditions"]["runtime"] == f"ncnn {run['metrics']['engine_version']}"
        assert run["conditions"]["conversion"].startswith("pnnx 20")
        assert Path(run["model_converted"]).parent == conversion_cache
    assert entry(summary, "nb201_0")["statuses"] == {"ok": 2}
    converted = sorted(conversion_cache.glob("nb201_0-*"))
    assert [p.suffix for p in converted] == [".bin", ".param"]
    stamps = [p.stat().st_mtime_ns for p in converted]
    profile_json(capsys, tmp_path / "again", "nb201_0", "--runtime", "ncnn", *QUICK)
    assert [p.stat().st_mtime_ns for p in converted] == stamps  # converted once: the second session found it


def test_a_conversion_says_what_it_converts_and_how_long_it_took(capsys, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside a terminal (captured here, as in a CI log) a session says what it converts, how long that took, and
    each run as it starts; a model found converted says nothing of a conversion."""
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    model = make_matmul_model(tmp_path / "said.onnx", size=32, layers=1)
    for results in ("first", "again"):
        capsys.readouterr()
        assert main(["profile", str(model), "--runtime", "ncnn", *QUICK, "--json",
                     "--results-dir", str(tmp_path / results)]) == 0
        err = capsys.readouterr().err
        assert "run 1/2: said cpus=1 round 1 · elapsed 0:00:00 · eta ?" in err and "2 runs done in" in err
        converted = re.search(r"converting said for ncnn with pnnx \S+: done in \d+\.\d s", err)
        assert (converted is not None) == (results == "first"), err


def test_two_engines_runs_of_one_model_are_never_pooled(capsys, tmp_path: Path, tiny_onnx: Path) -> None:
    for runtime in ("onnxruntime", "ncnn"):
        profile_json(capsys, tmp_path, str(tiny_onnx), "--runtime", runtime, *QUICK)
    runs = list(iter_all_runs(tmp_path))
    assert {r["conditions"]["runtime"].split()[0] for r in runs} == {"onnxruntime", "ncnn"}
    assert {r["model_sha256"] for r in runs} == {sha256_of(tiny_onnx)}  # the same model, two engines
    assert "differ in RUNTIME" in pooling_conflict(r.line for r in runs)
    capsys.readouterr()
    assert main(["rank", "--session", "all", "--results-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "differ in RUNTIME" in err and "ncnn 1." in err and "onnxruntime 1." in err
    for runtime in ("ncnn", "onnxruntime"):  # one engine's runs, as a device's data measured with it pairs with
        assert main(["rank", "--session", "all", "--results-dir", str(tmp_path), "--runtime", runtime,
                     "--json"]) == 0
        (row,) = json.loads(capsys.readouterr().out)["ranking"]
        assert row["runs"] == 2  # the two runs of that engine, not the four
    assert main(["rank", "--session", "all", "--results-dir", str(tmp_path), "--runtime", "litert"]) == 2
    assert capsys.readouterr().err == ("harness: error: --runtime litert: no run of session all ran on litert (its "
                                       "runs ran on ncnn, onnxruntime); profile the models with RUNTIME=litert first\n")


def test_a_model_over_the_memory_limit_is_oom_and_the_session_goes_on(capsys, tmp_path: Path, tiny_onnx: Path) -> None:
    """64 MiB of fp32 weights once ncnn has loaded them, under a 64 MiB limit; the tiny model beside it fits."""
    big = make_matmul_model(tmp_path / "big_mlp.onnx", size=2048, layers=4)
    summary = profile_json(capsys, tmp_path / "results", str(big), str(tiny_onnx), "--runtime", "ncnn",
                           *QUICK, "--repeats", "1", "--memory", "64m")
    runs = {r["model_name"]: r for r in session_runs(tmp_path / "results")}
    assert runs["big_mlp"]["status"] == "oom" and runs["big_mlp"]["peak_memory_mib"] <= 64.5
    assert runs["tiny_mlp"]["status"] == "ok"
    assert entry(summary, "big_mlp")["statuses"] == {"oom": 1}


def test_a_param_file_given_as_model_runs_on_ncnn(capsys, tmp_path: Path, conversion_cache: Path) -> None:
    resolve_model("nb201_0", runtime="ncnn")
    mine = tmp_path / "models"
    mine.mkdir()
    for made in conversion_cache.glob("nb201_0-*"):
        shutil.copyfile(made, mine / f"cell{made.suffix}")
    model = mine / "cell.param"
    summary = profile_json(capsys, tmp_path / "results", str(model), *QUICK)
    runs = session_runs(tmp_path / "results")
    assert [r["status"] for r in runs] == ["ok", "ok"] and entry(summary, "cell")["statuses"] == {"ok": 2}
    assert runs[0]["model_kind"] == "ncnn" and runs[0]["conditions"]["conversion"] is None
    assert runs[0]["model_sha256"] == sha256_of(model, model.with_suffix(".bin"))
    assert runs[0]["conditions"]["runtime"].startswith("ncnn ")


def test_a_param_without_input_shapes_takes_them_from_shape(capsys, tmp_path: Path, conversion_cache: Path) -> None:
    resolve_model("nb201_0", runtime="ncnn")
    (made,) = conversion_cache.glob("nb201_0-*.param")
    model = tmp_path / "bare.param"
    text = made.read_text()
    assert "Input in0 0 1 in0 2=3 1=32 0=32\n" in text  # c, h, w as the conversion wrote them
    model.write_text(text.replace(" 2=3 1=32 0=32", ""))  # as a .param from elsewhere often comes
    shutil.copyfile(made.with_suffix(".bin"), tmp_path / "bare.bin")
    profile_json(capsys, tmp_path / "results", str(model), *QUICK, "--repeats", "1")
    (run,) = session_runs(tmp_path / "results")
    assert run["status"] == "error" and "--shape in0=CxHxW" in run["stderr_tail"]
    profile_json(capsys, tmp_path / "shaped", str(model), *QUICK, "--repeats", "1", "--", "--shape", "in0=3x32x32")
    (run,) = session_runs(tmp_path / "shaped")
    assert run["status"] == "ok" and run["metrics"]["input_shapes"] == "in0=3x32x32"


def test_a_param_without_its_bin_is_one_line(capsys, tmp_path: Path) -> None:
    (tmp_path / "lonely.param").write_text("7767517\n1 1\nInput in0 0 1 in0 0=4\n")
    capsys.readouterr()
    assert main(["profile", "--results-dir", str(tmp_path), str(tmp_path / "lonely.param"), *QUICK]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lonely.bin beside it, which is not there" in err


def test_an_op_ncnn_lacks_is_one_line_its_runs_are_errors_and_the_others_go_on(capsys, tmp_path: Path,
                                                                               tiny_onnx: Path) -> None:
    hardmax = make_hardmax_model(tmp_path / "hardmax.onnx")
    capsys.readouterr()
    assert main(["profile", "--json", "--results-dir", str(tmp_path / "results"), str(hardmax), str(tiny_onnx),
                 "--runtime", "ncnn", *QUICK]) == 0
    out, err = capsys.readouterr()
    refusal = [line for line in err.splitlines() if line.startswith("warning:")]
    assert refusal == [f"warning: model hardmax: ncnn has no operator Hardmax (pnnx {converter_version()} could not "
                       "convert it); run this model with RUNTIME=onnxruntime (its runs are recorded as errors)"]
    runs = session_runs(tmp_path / "results")
    assert {r["status"] for r in runs if r["model_name"] == "hardmax"} == {"error"}
    assert all("ncnn has no operator Hardmax" in r["stderr_tail"] for r in runs if r["model_name"] == "hardmax")
    assert {r["status"] for r in runs if r["model_name"] == "tiny_mlp"} == {"ok"}
    assert entry(json.loads(out), "hardmax")["statuses"] == {"error": 2}


def test_a_missing_extra_is_one_line_naming_it(capsys, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                               tiny_onnx: Path) -> None:
    monkeypatch.setitem(sys.modules, "pnnx", None)  # as an install without the extra sees it
    with pytest.raises(ModelError, match="needs the ncnn extra"):
        resolve_model(str(tiny_onnx), runtime="ncnn")
    capsys.readouterr()
    assert main(["profile", "--results-dir", str(tmp_path), str(tiny_onnx), "--runtime", "ncnn", *QUICK]) == 2
    assert capsys.readouterr().err == f"harness: error: {MISSING_EXTRA}\n"
    with pytest.raises(ModelError, match="needs the ncnn extra"):  # not an empty join and a prediction otherwise
        converted_join(tiny_onnx)


def test_make_asks_for_the_extra_only_when_ncnn_runs_and_it_is_missing(monkeypatch: pytest.MonkeyPatch,
                                                                       in_tmp_cwd: Path) -> None:
    assert main(["zoo", "needs-extra", "--extra", "ncnn", "m.param"]) == 1  # the extra is installed here
    monkeypatch.setitem(sys.modules, "ncnn", None)
    assert main(["zoo", "needs-extra", "--extra", "ncnn", "m.onnx"]) == 1  # RUNTIME is onnxruntime
    assert main(["zoo", "needs-extra", "--extra", "ncnn", "m.param"]) == 0
    monkeypatch.setenv("HARNESS_SET_RUNTIME", "ncnn")  # make profile RUNTIME=ncnn
    assert main(["zoo", "needs-extra", "--extra", "ncnn", "m.onnx"]) == 0


def test_a_version_2_run_gets_the_engine_its_kind_ran_on(tmp_path: Path) -> None:
    """Runs stored before the engine was a condition ran ONNX on onnxruntime: they pool with today's of its version."""
    session = tmp_path / "old"
    session.mkdir()
    run = {"schema_version": 2, "session_id": "old", "run_id": "old-r000-0000", "model_name": "net",
           "model_kind": "onnx", "status": "ok", "conditions": {"cpus": 1.0},
           "provenance": {"packages": {"onnxruntime": "1.17.0"}, "backend": {"backend": "local"}}}
    (session / "runs.jsonl").write_text(json.dumps(run) + "\n")
    (session / "session.json").write_text(json.dumps({"schema_version": 2, "session_id": "old", "profile": {}}))
    (migrated,) = load_runs(session)
    assert migrated["schema_version"] == SCHEMA_VERSION == 4
    assert migrated["conditions"] == {"cpus": 1.0, "runtime": "onnxruntime 1.17.0", "conversion": None}


def test_device_data_pairs_with_the_runs_of_its_engine_and_regress_compares_engines(capsys, tmp_path: Path) -> None:
    models = ["nb201_0", "nb201_1", "nb201_2", "nb201_3", "nb201_4"]
    for runtime in ("onnxruntime", "ncnn"):
        profile_json(capsys, tmp_path, *models, "--runtime", runtime, *QUICK)
    medians = {engine: dict(zip(values["model_name"], values["value"], strict=True))  # each model's harness value
               for engine, values in ((engine, harness_values([r for r in iter_all_runs(tmp_path)
                                                               if r["conditions"]["runtime"].startswith(engine)],
                                                              "latency_ms")) for engine in ("ncnn", "onnxruntime"))}
    csv = tmp_path / "device.csv"  # a device that runs ncnn 5x slower than this host, minus 0.1 ms
    csv.write_text("model,latency_ms,runtime\n" + "".join(f"{m},{5 * medians['ncnn'][m] - 0.1:.6f},ncnn\n"
                                                           for m in models))
    assert main(["import-device", str(csv), "--device", "pi", "--results-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["regress", "--device", "pi", "--session", "all", "--results-dir", str(tmp_path), "--json"]) == 0
    (calibration,) = json.loads(capsys.readouterr().out)["calibrations"]  # not refused: only the ncnn runs pair
    paired = {p["harness_model"]: p["harness"] for p in calibration["points"]}
    assert paired == pytest.approx(medians["ncnn"]) and paired != pytest.approx(medians["onnxruntime"])
    assert main(["regress", "--device", "pi", "--session", "all", "--results-dir", str(tmp_path), "--json",
                 "--compare-engines"]) == 0
    rows = json.loads(capsys.readouterr().out)["engines"]["latency_ms"]
    assert [row["engine"] for row in rows] == ["onnxruntime", "ncnn", "auto engine"]
    assert all(row["models"] == 5 for row in rows)
    assert rows[1]["within_10pct"] == rows[2]["within_10pct"] == 1.0  # the device is a line of ncnn's timings
    assert rows[2]["fit"] == "ncnn 5"  # chosen in every fold: exact, so the smallest held-out MAPE
    csv.write_text("model,latency_ms,runtime\n" + "".join(f"{m},1.0,litert\n" for m in models))
    assert main(["import-device", str(csv), "--device", "phone", "--results-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["regress", "--device", "phone", "--session", "all", "--results-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        "harness: error: device phone (its data ran on litert): no run of session all ran on litert (its runs ran on "
        "ncnn, onnxruntime); profile the models with RUNTIME=litert first; or pass --runtime ENGINE to pair it with "
        "another engine's runs\n")


def test_per_op_on_ncnn_times_every_layer_marks_the_depthwise_ones_and_meets_onnxruntime(capsys,
                                                                                          tmp_path: Path) -> None:
    model = Path(__file__).resolve().parents[1] / "examples" / "models" / "mobilenet_v1_0.25_128.onnx"
    profile_json(capsys, tmp_path, str(model), "--runtime", "ncnn", "--per-op", *QUICK)
    run = session_runs(tmp_path)[0]
    per_op = run["per_op"]
    assert run["status"] == "ok" and per_op["framework"] == "ncnn" and per_op["iterations"] == 20
    layers = [line.split() for line in Path(run["model_converted"]).read_text().splitlines()[2:]]
    table = json.loads(next(Path(per_op["dir"]).glob("*.json")).read_text())
    timed = [row for row in table["ops"] if row["node_index"] is not None]
    assert [row["node"] for row in timed] == [fields[1] for fields in layers if fields[0] != "Input"]
    assert all(row["mean_ms"] >= 0 and row["calls"] == 1 for row in timed)
    depthwise = {fields[1] for fields in layers if fields[0] == "ConvolutionDepthWise"
                 and dict(f.split("=", 1) for f in fields[4:] if "=" in f).get("7")
                 == dict(f.split("=", 1) for f in fields[4:] if "=" in f).get("0")}
    assert len(depthwise) == 13 and {row["node"] for row in timed if row["depthwise"]} == depthwise
    assert 0.05 < per_op["depthwise_share"] < 0.95
    assert 0.5 < per_op["coverage"]["op_sum_ms"] / run["latency_stats_ms"]["mean"] < 2.5
    profile_json(capsys, tmp_path, str(model), "--runtime", "onnxruntime", "--per-op", *QUICK)
    capsys.readouterr()
    assert main(["ops", "mobilenet_v1_0.25_128", "--engines", "--results-dir", str(tmp_path), "--json"]) == 0
    engines = json.loads(capsys.readouterr().out)["engines"]
    assert engines["engines"] == ["onnxruntime", "ncnn"] and engines["cpus"] == 1
    kinds = {row["kind"]: row for row in engines["rows"]}
    for engine in engines["engines"]:  # both engines' depthwise layers meet under one kind
        assert 0.05 < kinds["DepthwiseConv"][f"share_{engine}"] < 0.95 and kinds["Conv"][f"ms_{engine}"] > 0
        assert sum(row[f"share_{engine}"] for row in engines["rows"]) == pytest.approx(1.0)
