"""Experiment-size check of the first promise (slow): profiled under the harness, the published Pixel 3
MobileNets come out in nearly the order the phone measured them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from tests.zoo_support import zoo_cache  # noqa: F401  (fixture)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pixel3_quant_tflite.csv"
MODELS = [f"mobilenet_v1_{a}_{r}_int8_static" for a in ("0.25", "0.5", "0.75", "1.0") for r in (128, 160, 192, 224)]
MODELS.append("mobilenet_v2_1.0_224_int8_static")
MIN_SPEARMAN = 0.9
MIN_KENDALL = 0.75


@pytest.mark.slow
@pytest.mark.usefixtures("zoo_cache")
def test_harness_orders_the_pixel3_models_like_the_phone(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results"
    assert main(["profile", *MODELS, "--backend", "local", "--cpus", "2", "--memory", "2g", "--repeats", "3",
                 "--iterations", "100", "--warmup", "10", "--results-dir", str(results)]) == 0
    assert main(["import-device", str(EXAMPLE), "--device", "pixel-3", "--results-dir", str(results)]) == 0
    capsys.readouterr()
    assert main(["regress", "--device", "pixel-3", "--results-dir", str(results), "--json"]) == 0
    (calibration,) = json.loads(capsys.readouterr().out)["calibrations"]
    assert calibration["ols"]["n"] == len(MODELS)
    stats = calibration["stats"]
    assert stats["spearman_rho"] >= MIN_SPEARMAN and stats["kendall_tau"] >= MIN_KENDALL, stats
