"""import-device: validation (one clear line per bad input, with its CSV line number), units, duplicates, storage."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from harness.cli import main
from harness.device.data import load_device, match_models, normalise_model_name
from tests.analysis_fixtures import write_session

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pixel3_quant_tflite.csv"
MIB_PER_MB = 1e6 / 2**20


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def import_csv(capsys: pytest.CaptureFixture[str], csv: Path, results: Path, device: str = "dev"):
    return run_cli(capsys, "import-device", str(csv), "--device", device, "--results-dir", str(results))


def test_pixel3_example_imports_with_units_converted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = import_csv(capsys, EXAMPLE, tmp_path / "results", "pixel3")
    assert code == 0, err
    assert "converted size_mb → size_mib (× 0.953674; 1 MB = 10⁶ bytes)" in out and "created" in out
    source = pd.read_csv(EXAMPLE, comment="#")
    device = load_device(tmp_path / "results", "pixel3")
    assert len(device.table) == len(source) == 21
    assert set(device.metrics) == {"latency_ms", "nnapi_ms", "size_mib"}
    assert set(device.tags) == {"device", "top1"}
    stored = device.table.set_index("model")
    for row in source.itertuples():
        assert stored.loc[row.model, "latency_ms"] == pytest.approx(row.latency_ms)
        assert stored.loc[row.model, "size_mib"] == pytest.approx(row.size_mb * MIB_PER_MB)
        assert stored.loc[row.model, "cpus"] == row.threads
    assert device.info["comments"][0].startswith("Published on-device latencies")
    # No harness runs yet: every model is listed as unknown, in one warning.
    assert "21 of 21 device models match no model" in err and "inception_v4_299_quant" in err


def test_a_device_model_that_matches_nothing_offers_the_closest_name(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    write_session(results, {"my_resnet18": [5.0], "mobilenet_v2": [2.0]})
    csv = tmp_path / "dev.csv"
    csv.write_text("model,latency_ms\nmy_resnt18,50\nmobilenet_v2,20\nefficientnet_b0,30\n")
    code, _, err = import_csv(capsys, csv, results)
    assert code == 0, err
    err = " ".join(err.split())
    assert "2 of 3 device models match no model" in err
    assert "efficientnet_b0, my_resnt18 (did you mean my_resnet18?);" in err


def test_reimporting_the_same_file_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    import_csv(capsys, EXAMPLE, results)
    files = sorted((results / "devices" / "dev").iterdir())
    before = {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in files}
    code, out, _ = import_csv(capsys, EXAMPLE, results)
    assert code == 0 and out.strip().splitlines()[-1].startswith("unchanged")
    assert sorted((results / "devices" / "dev").iterdir()) == files
    assert {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in files} == before


def test_repeats_become_their_median_with_their_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One disturbed repeat (20 ms among 10 and 12) moves the mean to 14 and the median not at all."""
    csv = tmp_path / "d.csv"
    csv.write_text("model,repeat,latency_us,peak_memory_mb\nnet_a,1,10000,100\nnet_b,1,5000,50\n"
                   "net_a,2,12000,110\nnet_a,3,20000,120\n")
    code, out, err = import_csv(capsys, csv, tmp_path / "results")
    assert code == 0, err
    assert f"3 repeats of net_a ({csv}:2, 4, 5): their median kept, n=3" in out
    assert "converted latency_us → latency_ms (× 0.001; 1 µs = 10⁻³ ms)" in out
    table = load_device(tmp_path / "results", "dev").table.set_index("model")
    assert table.loc["net_a", "latency_ms"] == pytest.approx(12.0)
    assert table.loc["net_a", "peak_memory_mib"] == pytest.approx(110 * MIB_PER_MB)
    assert table.loc["net_a", "n"] == 3 and table.loc["net_b", "n"] == 1
    repeats = pd.read_csv(tmp_path / "results" / "devices" / "dev" / "repeats.csv")
    assert repeats.loc[repeats["model"] == "net_a", "latency_ms"].tolist() == [10.0, 12.0, 20.0]
    assert repeats["source"].tolist() == [f"{csv}:{line}" for line in (2, 3, 4, 5)]


def test_kb_columns_are_kib_as_proc_and_dumpsys_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """VmHWM "51200 kB" in /proc/<pid>/status and dumpsys's "TOTAL PSS 51200" KB are 50 MiB, not 48.8."""
    csv = tmp_path / "d.csv"
    csv.write_text("model,peak_rss_kb\nnet_a,51200\n")
    code, out, err = import_csv(capsys, csv, tmp_path / "results")
    assert code == 0, err
    assert "converted peak_rss_kb → peak_rss_mib (× 0.000976562; 1 kB = 1 KiB" in out
    assert load_device(tmp_path / "results", "dev").table.set_index("model").loc["net_a", "peak_rss_mib"] == 50.0


def test_unknown_models_are_listed_in_one_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    write_session(results, {"net_a": [1.0], "net_b": [2.0]})
    csv = tmp_path / "d.csv"
    csv.write_text("model,latency_ms\nnet_a_quant,1\nnet_b,2\nmystery_1,3\nmystery_2,4\n")
    code, out, err = import_csv(capsys, csv, results)
    assert code == 0
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "2 of 4 device models" in warnings[0]
    assert "mystery_1, mystery_2" in warnings[0] and "net_a" not in warnings[0]


BAD_INPUTS = [
    ("# source\nmodel,latency_ms\nnet_a,1.5\nnet_b,fast\n", "d.csv:4: column latency_ms holds 'fast', not a"),
    ("model,latency_ms\nnet_a,-2\n", "d.csv:2: column latency_ms holds '-2', not a non-negative finite number"),
    ("model,threads,latency_ms\nnet_a,four,2\n", "d.csv:2: column cpus holds 'four', not a positive finite number"),
    ("model,threads,latency_ms\nnet_a,2,2\nnet_b,,3\n", "d.csv:3: column cpus holds '', not a positive finite number"),
    ("model,latency_ms\nnet_a,1\nnet_b,2,3\n", "d.csv:3: 3 cells but the header has 2"),
    ("model,latency_ms\n,1\n", "d.csv:2: empty `model` cell"),
    ("# from a phone\nname,latency_ms\nnet_a,1\n", "d.csv:2: no `model` column"),
    ("model;latency_ms\nnet_a;1\n", "d.csv:1: no `model` column; name the column of model names `model`; the file "
     "seems to use ';' or tabs: save it with commas"),
    ("model,family\nnet_a,x\n", "no metric column"),
    ("model,threads,cpus,latency_ms\nnet_a,1,1,1\n", "both `threads` and `cpus`"),
    ("model,latency_ms\n", "a header but no data rows"),
    ("model,latency_ms,family\nnet_a,1,cnn\nnet_b,1,cnn\nnet_a,2,vit\n",
     "d.csv:4: family 'vit' contradicts 'cnn' on line 2"),
]


@pytest.mark.parametrize(("text", "needle"), BAD_INPUTS)
def test_bad_csv_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str) -> None:
    csv = tmp_path / "d.csv"
    csv.write_text(text)
    code, out, err = import_csv(capsys, csv, tmp_path / "results")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("harness: error:") and needle in err, err
    assert not (tmp_path / "results" / "devices").exists()


@pytest.mark.parametrize(
    ("argv", "needle"),
    [(["missing.csv", "--device", "d"], "device file missing.csv not found"),
     (["d.csv", "--device", "../evil"], "--device '../evil': use letters")],
)
def test_bad_arguments_are_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                          needle: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.csv").write_text("model,latency_ms\nnet,1\n")
    code, _, err = run_cli(capsys, "import-device", *argv, "--results-dir", "results")
    assert code == 2 and err.count("\n") == 1 and needle in err


def test_cli_subprocess_prints_no_traceback(tmp_path: Path) -> None:
    import subprocess
    import sys

    csv = tmp_path / "d.csv"
    csv.write_text("model,latency_ms\nnet_a,1\nnet_b,n/a\n")
    harness = Path(sys.executable).parent / "harness"
    done = subprocess.run([str(harness), "import-device", str(csv), "--device", "d", "--results-dir",
                           str(tmp_path / "r")], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == f"harness: error: {csv}:3: column latency_ms holds 'n/a', not a non-negative " \
        "finite number; fix that cell (leave it empty if not measured)"


def test_zoo_models_answer_to_their_name_with_their_input_size() -> None:
    """Published tables name a model with its input size (`inception_v3_299_quant`) where the zoo leaves it implicit
    (`inception_v3`, built at 299 × 299); another size is another model. A name that has its size, a video
    input, a name outside the zoo's grammar or with values it does not build (a user's file) gains nothing."""
    harness = ["inception_v3_int8_static", "inception_v1", "squeezenet1_0", "mobilenet_v2_1.0_224", "resnet18_v9",
               "mobilenet_v2_3d_1.0", "mobilenet_v1_0.3_128"]
    device = ["inception_v3_299_quant", "inception_v1_224", "inception_v3_224_quant", "squeezenet1_0_224",
              "mobilenet_v2_1.0_224_224", "resnet18_v9_224", "mobilenet_v2_3d_1.0_112", "mobilenet_v1_0.3_128_128"]
    assert match_models(device, {}, harness) == {
        "inception_v3_299_quant": "inception_v3_int8_static",
        "inception_v1_224": "inception_v1",
        "squeezenet1_0_224": "squeezenet1_0",
    }


def test_model_names_normalise_across_precision_suffixes() -> None:
    assert normalise_model_name("MobileNet-V1_0.50_128_quant.tflite") == ("mobilenet_v1_0.5_128", 2)
    assert normalise_model_name("resnet18_fp32.onnx") == ("resnet18", None)
    harness = ["mobilenet_v1_0.25_128", "mobilenet_v1_0.25_128_int8_dynamic", "mobilenet_v1_0.25_128_int8_static",
               "mobilenet_v1_0.5_128_int8_dynamic", "resnet18", "other"]
    device = ["mobilenet_v1_0.25_128_quant", "mobilenet_v1_0.25_128_float", "mobilenet_v1_0.50_128_quant",
              "resnet18_quant", "custom", "gone"]
    mapping = match_models(device, {"custom": "other", "gone": "not_profiled"}, harness)
    assert mapping == {
        "mobilenet_v1_0.25_128_quant": "mobilenet_v1_0.25_128_int8_static",  # static preferred over dynamic
        "mobilenet_v1_0.25_128_float": "mobilenet_v1_0.25_128",
        "mobilenet_v1_0.50_128_quant": "mobilenet_v1_0.5_128_int8_dynamic",  # 0.50 == 0.5
        "resnet18_quant": "resnet18",  # only one candidate: matched across precisions
        "custom": "other",  # explicit harness_model cell
    }


def test_a_runtime_column_names_the_engine_and_a_wrong_one_is_one_line(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.csv"
    good.write_text("model,latency_ms,runtime\nm1,1.0,TFLite\nm2,2.0,litert\nm3,3.0,\n")
    assert import_csv(capsys, good, tmp_path / "results")[0] == 0
    assert load_device(tmp_path / "results", "dev").runtime == "litert"  # tflite is LiteRT's old name
    bad = tmp_path / "bad.csv"
    bad.write_text("model,latency_ms,runtime\nm1,1.0,ncnn\nm2,2.0,tensorrt\n")
    code, _, err = import_csv(capsys, bad, tmp_path / "results", "other")
    assert code == 2
    assert err == (f"harness: error: {bad}:3: column runtime holds 'tensorrt', not an engine the harness runs; write "
                   "one of onnxruntime, ncnn, litert (or tflite), or leave it empty\n")
    two = tmp_path / "two.csv"
    two.write_text("model,latency_ms,runtime\nm1,1.0,ncnn\nm2,2.0,litert\nm3,3.0,ncnn\n")
    assert import_csv(capsys, two, tmp_path / "results", "two")[0] == 0
    write_session(tmp_path / "results", {"m1": [1.0], "m2": [2.0], "m3": [3.0]})
    code, _, err = run_cli(capsys, "regress", "--device", "two", "--results-dir", str(tmp_path / "results"))
    assert code == 2 and err.count("\n") == 1
    assert "device two: its rows name 2 engines (litert, ncnn) in column runtime; import each engine's rows" in err


@pytest.mark.parametrize("csv", sorted((EXAMPLE.parent).glob("ncnn_*_1t.csv")), ids=lambda p: p.stem)
def test_ncnn_tables_import_as_ncnn_data_of_zoo_models(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       csv: Path) -> None:
    from harness.zoo import is_zoo_name

    assert import_csv(capsys, csv, tmp_path / "results")[0] == 0
    device = load_device(tmp_path / "results", "dev")
    assert device.runtime == "ncnn" and len(device.table) == 13 and set(device.table["cpus"]) == {1}
    assert all(is_zoo_name(model) for model in device.table["model"])
