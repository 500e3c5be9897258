"""Predictions as one typed record (harness.calibration.prediction.Prediction), from the CLI and from Python."""

from __future__ import annotations

import json

import pytest

import harness
from harness.cli import main
from harness.device.library import shipped_tables

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
