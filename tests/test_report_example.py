"""The README's Pixel 3 example end to end with real runs: zoo models profiled under the harness's limits,
the published Pixel 3 latencies imported, the report written, and its HTML rendered by headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image

from harness.cli import main
from harness.report.figures import FIT_COLOR
from harness.store.results import list_sessions
from tests.zoo_support import zoo_cache  # noqa: F401  (fixture)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pixel3_quant_tflite.csv"
MODELS = ["mobilenet_v1_0.25_128", "mobilenet_v1_0.25_160", "mobilenet_v1_0.5_128"]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]


@pytest.fixture(scope="module")
def example_session(tmp_path_factory: pytest.TempPathFactory, zoo_cache: Path) -> Path:  # noqa: F811
    """A real profile of three float MobileNets (matched to the `_quant` rows by name), and its report."""
    root = tmp_path_factory.mktemp("example")
    results = root / "results"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        assert main(["profile", *MODELS, "--backend", "local", "--device-name", "pixel-3", "--cpus", "1",
                     "--memory", "1g", "--repeats", "2", "--iterations", "5", "--warmup", "1",
                     "--results-dir", str(results)]) == 0
        assert main(["import-device", str(EXAMPLE), "--device", "pixel-3", "--results-dir", str(results)]) == 0
        assert main(["report", "--results-dir", str(results)]) == 0
    return list_sessions(results)[-1]


def test_example_report_calibrates_the_profiled_models(example_session: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    runs = [json.loads(line) for line in (example_session / "runs.jsonl").read_text().splitlines()]
    assert {run["status"] for run in runs} == {"ok"}
    points = json.loads((example_session / "report" / "tables" / "calibration_pixel-3_points.json").read_text())
    assert {p["harness_model"] for p in points} == set(MODELS)
    # Each model's fastest inference over its repeats: what calibration takes for a latency.
    measured = {m: min(r["latency_stats_ms"]["min"] for r in runs if r["model_name"] == m) for m in MODELS}
    assert {p["harness_model"]: p["harness"] for p in points} == pytest.approx(measured)
    published = {"mobilenet_v1_0.25_128_quant": 0.8, "mobilenet_v1_0.25_160_quant": 1.3,
                 "mobilenet_v1_0.50_128_quant": 1.7}
    assert {p["model"]: p["device"] for p in points} == pytest.approx(published)
    assert (example_session / "report" / "figures" / "calibration_pixel-3_latency_ms_cpus_1_fit.png").exists()


def test_example_report_renders_with_its_plots_in_chromium(example_session: Path, tmp_path: Path) -> None:
    if CHROMIUM is None:
        if os.environ.get("HARNESS_REQUIRE_CHROMIUM") == "1":
            pytest.fail("HARNESS_REQUIRE_CHROMIUM=1 but no chromium on PATH: apt-get install -y chromium")
        pytest.skip("no chromium on PATH (Debian: apt-get install -y chromium); set HARNESS_REQUIRE_CHROMIUM=1 to fail")
    html = example_session / "report" / "report.html"
    shot = tmp_path / "report.png"
    done = subprocess.run(
        [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,9000",
         f"--screenshot={shot}", html.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert shot.exists(), done.stderr[-2000:]
    pixels = image.imread(shot)[..., :3]
    fit = np.array([int(FIT_COLOR[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    # The fit lines and the ranking error bars are drawn in FIT_COLOR; nothing else on the page is.
    drawn = np.all(np.abs(pixels - fit) < 0.03, axis=-1).sum()
    assert drawn > 500, f"only {drawn} pixels of the plots' colour: the figures did not render"
    # A broken image would leave the page mostly white; rendered plots and tables are not.
    assert (pixels.mean(axis=-1) < 0.9).sum() > 20_000
