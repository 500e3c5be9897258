"""Reports: every table and figure reaches Markdown, HTML, CSV, JSON and PNG, with the numbers computed."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from harness.calibration.calibrate import calibrate_runs
from harness.cli import main
from harness.device.data import load_device
from harness.report.format import sig
from harness.store.results import load_runs
from tests.analysis_fixtures import write_session

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
LATENCIES = {"net_a": [1.0, 1.1, 1.2, 1.05], "net_b": [2.0, 2.2, 2.1, 2.3], "net_c": [4.1, 4.0, 4.3, 4.2],
             "net_d": [6.0, 6.1, 6.3, 6.2], "net_new": [5.0, 5.1, 5.2, 5.1]}
DEVICE = "model,threads,latency_ms,family\nnet_a,4,3.1,x\nnet_b,4,5.9,x\nnet_c,4,12.4,x\nnet_d,4,17.8,x\n"


@pytest.fixture
def report_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    results = tmp_path / "results"
    session = write_session(results, LATENCIES, cpus=2.0)
    (tmp_path / "phone.csv").write_text(DEVICE)
    assert main(["import-device", str(tmp_path / "phone.csv"), "--device", "phone", "--results-dir", str(results)]) == 0
    assert main(["report", "--results-dir", str(results)]) == 0
    assert "report.html" in capsys.readouterr().out
    return results, session


def test_every_table_and_figure_is_written_in_every_format(report_dir: tuple[Path, Path]) -> None:
    _, session = report_dir
    out = session / "report"
    markdown = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    figures = sorted((out / "figures").glob("*.png"))
    names = {p.stem for p in figures}
    assert {"calibration_phone_latency_ms_cpus_2_fit", "calibration_phone_latency_ms_cpus_2_residuals",
            "ranking_latency_ms_cpus2"} <= names
    for figure in figures:
        assert figure.read_bytes().startswith(PNG_MAGIC)
        assert f"(figures/{figure.name})" in markdown
    embedded = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", html)
    assert sorted(base64.b64decode(data) for data in embedded) == sorted(p.read_bytes() for p in figures)
    assert not re.search(r"(src|href)=['\"]?(https?:|//|file:)", html)  # self-contained
    tables = {p.stem for p in (out / "tables").glob("*.csv")}
    assert tables == {p.stem for p in (out / "tables").glob("*.json")}
    assert {"summary", "ranking_latency_ms", "calibration_phone_comparison", "calibration_phone_fits",
            "calibration_phone_points", "calibration_phone_predictions"} <= tables
    for name in tables:
        assert f"tables/{name}.csv" in markdown


def test_report_numbers_are_the_calibration_and_ranking_numbers(report_dir: tuple[Path, Path]) -> None:
    results, session = report_dir
    tables = session / "report" / "tables"
    cset, _ = calibrate_runs(load_device(results, "phone"), load_runs(session))
    (calibration,) = cset.calibrations
    fits = json.loads((tables / "calibration_phone_fits.json").read_text())
    assert fits[0]["fit"] == calibration.model.name
    assert fits[0]["ols_slope"] == pytest.approx(calibration.reference_line.slope, rel=1e-12)
    assert fits[0]["ols_r2"] == pytest.approx(calibration.reference_line.r2, rel=1e-12)
    assert fits[0]["loo_mape_pct"] == pytest.approx(calibration.stats["loo_mape_pct"], rel=1e-12)
    csv_fits = pd.read_csv(tables / "calibration_phone_fits.csv")
    assert csv_fits["ols_intercept"][0] == pytest.approx(calibration.reference_line.intercept, rel=1e-12)
    comparison = pd.read_csv(tables / "calibration_phone_comparison.csv")
    assert comparison["fit"].tolist() == ["ols", "ops", "relative", "loglog", "kernels", "features", "work", "library",
                                          "auto"]
    for row in calibration.comparison:
        if "within_10pct" in row:
            assert comparison.set_index("fit").loc[row["fit"], "within_10pct"] == pytest.approx(row["within_10pct"])
    predictions = json.loads((tables / "calibration_phone_predictions.json").read_text())
    assert [p["model"] for p in predictions] == ["net_new"]
    assert predictions[0]["predicted"] == pytest.approx(calibration.model.predict(calibration.design(5.0))[0],
                                                        rel=1e-12)
    ranking = pd.read_csv(tables / "ranking_latency_ms.csv")
    assert ranking.sort_values("median")["model"].tolist() == ["net_a", "net_b", "net_c", "net_new", "net_d"]
    summary = pd.read_csv(tables / "summary.csv").set_index("model")
    assert summary.loc["net_b", "latency_p50_ms_median"] == pytest.approx(2.15)
    html = (session / "report" / "report.html").read_text()
    assert calibration.model.equation in html


def test_with_a_device_the_answer_ranks_by_its_predictions(report_dir: tuple[Path, Path]) -> None:
    """A device imported beside the session: the answer's first words and first table rank the models by that
    device's predicted latency with their intervals (a model whose interval overlaps that of its rank's first model
    shares the rank), the host's
    ranking after it."""
    results, session = report_dir
    out = session / "report"
    answer = (out / "report.md").read_text().split("\n## ")[1]
    assert answer.index("On phone, by its predicted latency") < answer.index("Under this profile")
    assert answer.index("Ranking on phone by predicted latency") < answer.index("on this host")
    ranking = pd.read_csv(out / "tables" / "answer_device_ranking_phone.csv")
    assert list(ranking["model"]) == ["net_a", "net_b", "net_c", "net_new", "net_d"]  # by predicted latency
    assert (ranking["predicted_ms"].diff().dropna() >= 0).all()
    assert (ranking["pi_low_ms"] <= ranking["predicted_ms"]).all()
    for above, below in zip(ranking.itertuples(), ranking.iloc[1:].itertuples(), strict=False):
        first = ranking[ranking["rank"] == above.rank].iloc[0]  # a tie is with the rank's first model, not a chain
        assert (below.rank == above.rank) == (below.pi_low_ms <= first["pi_high_ms"])
    best = ranking[ranking["rank"] == 1]
    assert f"fastest: {best['model'].iloc[0]} (" in answer or "fastest, tied" in answer


def test_the_answer_picks_the_most_accurate_model_under_the_latency_budget(
        report_dir: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Accuracies from the user's file: the answer gives accuracy against the device's predicted latency, its
    Pareto front, and the most accurate model whose predicted latency is within --max-latency-ms."""
    results, session = report_dir
    (tmp_path / "acc.csv").write_text("model,accuracy\nnet_a,60\nnet_b,70\nnet_c,65\nnet_d,75\nnet_new,72\n")
    assert main(["report", "--results-dir", str(results), "--accuracy", str(tmp_path / "acc.csv"),
                 "--max-latency-ms", "12"]) == 0
    capsys.readouterr()
    out = session / "report"
    table = pd.read_csv(out / "tables" / "answer_accuracy.csv")
    assert set(table["latency_on"]) == {"phone"} and set(table["source"]) == {"acc.csv"}
    assert table.set_index("model").loc["net_d", "accuracy_pct"] == 75
    front = set(table.loc[table["non_dominated"], "model"])
    assert {"net_a", "net_d"} <= front and "net_c" not in front  # net_b is faster and more accurate than net_c
    within = table[table["latency_ms"] <= 12]
    pick = within.sort_values("accuracy_pct").iloc[-1]
    answer = " ".join((out / "report.md").read_text().split("\n## ")[1].split())
    assert f"Most accurate under {sig(12.0)} ms on phone: {pick['model']} ({sig(pick['accuracy_pct'])}%" in answer
    assert "Accuracy against latency" in answer


def test_accuracy_comes_from_a_device_csv_and_the_published_tables(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from harness.device.accuracy import accuracies

    results = tmp_path / "results"
    (tmp_path / "mine.csv").write_text("model,latency_ms,top1\nmy_net,12,68.5\nmobilenet_v1_0.25_128,5,40.0\n")
    assert main(["import-device", str(tmp_path / "mine.csv"), "--device", "mine", "--results-dir", str(results)]) == 0
    capsys.readouterr()
    found = accuracies(["my_net", "mobilenet_v1_0.25_128", "mobilenet_v2_1.0_224", "unknown"], results)
    assert (found["my_net"].value, found["my_net"].source) == (68.5, "device mine's CSV (top1)")
    assert found["mobilenet_v1_0.25_128"].value == 40.0  # the user's device CSV before the published figure
    assert found["mobilenet_v2_1.0_224"].value == 71.8  # the published float top-1 (Pixel 2 float table)
    assert "floating point" in found["mobilenet_v2_1.0_224"].source and "unknown" not in found


def test_two_devices_are_one_table_of_models_by_devices(report_dir: tuple[Path, Path], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    results, session = report_dir
    (tmp_path / "pi.csv").write_text(DEVICE.replace(",4,", ",1,").replace("3.1", "9.4").replace("5.9", "17.5")
                                     .replace("12.4", "36.9").replace("17.8", "55.2"))
    assert main(["import-device", str(tmp_path / "pi.csv"), "--device", "pi", "--results-dir", str(results)]) == 0
    assert main(["report", "--results-dir", str(results)]) == 0
    capsys.readouterr()
    table = pd.read_csv(session / "report" / "tables" / "answer_devices.csv").set_index("model")
    assert sorted(table.columns) == ["phone", "pi"] and set(table.index) == set(LATENCIES)
    for device in ("phone", "pi"):
        assert all(re.fullmatch(r"[\d.]+ \[-?[\d.]+, [\d.]+\]", cell) for cell in table[device]), table[device]
    ranking = pd.read_csv(session / "report" / "tables" / "answer_device_ranking_phone.csv")  # the answering device
    phone = ranking.set_index("model")["predicted_ms"]
    assert all(float(table.loc[m, "phone"].split()[0]) == pytest.approx(v, rel=5e-3) for m, v in phone.items())
    assert float(table.loc["net_d", "pi"].split()[0]) > 2 * float(table.loc["net_d", "phone"].split()[0])


def test_report_without_runs_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--results-dir", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no sessions under" in err


def test_a_sweep_session_gets_scaling_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    session = write_session(results, {"net_a": [4.0, 4.2], "net_b": [8.0, 8.4]}, cpus=1.0)
    write_session(results, {"net_a": [2.0, 2.2], "net_b": [4.0, 4.4]}, cpus=2.0, session_id=session.name)
    assert main(["report", "--results-dir", str(results)]) == 0
    out = session / "report"
    assert {"scaling_latency_p50_ms_median", "scaling_peak_memory_mib_median"} <= {
        p.stem for p in (out / "figures").glob("*.png")}
    summary = pd.read_csv(out / "tables" / "summary.csv")
    medians = {(r.model, r.cpus): r.latency_p50_ms_median for r in summary.itertuples()}
    expected = {("net_a", 1.0): 4.1, ("net_a", 2.0): 2.1, ("net_b", 1.0): 8.2, ("net_b", 2.0): 4.2}
    assert medians == pytest.approx(expected)
    ranking = pd.read_csv(out / "tables" / "ranking_latency_ms.csv")
    assert sorted(ranking["cpus"].unique()) == [1.0, 2.0]


def test_report_groups_calibration_by_a_tag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    session = write_session(results, {**LATENCIES, "net_e": [3.0, 3.1], "net_f": [5.0, 5.1], "net_g": [7.0, 7.2]})
    rows = DEVICE + "net_e,4,9.1,y\nnet_f,4,15.1,y\nnet_g,4,21.2,y\n"
    (tmp_path / "phone.csv").write_text(rows)
    assert main(["import-device", str(tmp_path / "phone.csv"), "--device", "phone", "--results-dir", str(results)]) == 0
    assert main(["report", "--results-dir", str(results), "--group-by", "family"]) == 0
    fits = pd.read_csv(session / "report" / "tables" / "calibration_phone_fits.csv")
    assert fits["group"].tolist() == ["cpus=2, family=x", "cpus=2, family=y"]
    assert fits["ols_n"].tolist() == [4, 3]
    assert main(["report", "--results-dir", str(results), "--group-by", "os"]) == 2
    assert "--group-by os" in capsys.readouterr().err


def test_the_calibration_section_has_a_learning_curve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With enough device models, the report shows how the held-out share grows with the models measured."""
    results = tmp_path / "results"
    harness = {f"net_{i}": [1.0 + 1.7 * i, 1.1 + 1.7 * i] for i in range(9)}
    write_session(results, harness, cpus=2.0)
    rows = [f"net_{i},2,{3.0 * (1.0 + 1.7 * i) * (1.04 if i % 3 else 0.97)!r},x" for i in range(9)]
    (tmp_path / "phone.csv").write_text("model,threads,latency_ms,family\n" + "\n".join(rows) + "\n")
    assert main(["import-device", str(tmp_path / "phone.csv"), "--device", "phone", "--results-dir", str(results)]) == 0
    assert main(["report", "--results-dir", str(results)]) == 0
    capsys.readouterr()
    out = sorted(results.glob("*"))[0] / "report"
    name = "calibration_phone_latency_ms_cpus_2_learning"
    assert (out / "figures" / f"{name}.png").read_bytes().startswith(PNG_MAGIC)
    curve = pd.read_csv(out / "tables" / f"{name}.csv")
    assert set(curve["k"]) == {3, 5} and set(curve["how"]) == {"suggest", "random"}  # k = 8 leaves 1 model
    assert curve["within_10pct"].between(0, 1).all() and curve["coverage"].between(0, 1).all()
    # Calibrated on all nine, the same law holds: five of them predict the other four within 10%.
    assert curve.loc[(curve["k"] == 5) & (curve["how"] == "suggest"), "within_10pct"].item() == 1.0
