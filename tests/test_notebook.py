"""The example notebook runs top to bottom in a real Jupyter kernel (nbclient) and shows a ranking and a plot; the
committed file carries no outputs."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NOTEBOOK = EXAMPLES / "pick_a_model_for_raspberry_pi_4.ipynb"


def test_the_committed_notebook_has_no_outputs() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(not cell.outputs and cell.execution_count is None for cell in code)


def test_the_notebook_runs_and_shows_a_ranking_and_a_plot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel inherits the environment: results go to a temporary folder, through the layer make uses.
    monkeypatch.setenv("HARNESS_SET_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("HARNESS_SET_BACKEND", "local")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    elsewhere = tmp_path / "elsewhere"  # not examples/: the notebook finds its models wherever it runs
    elsewhere.mkdir()
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(elsewhere)}}).execute()
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert any("latency_ms ranking" in text and "squeezenet1_1" in text for text in html)
    assert any("raspberry-pi-4" in text and "<table" in text for text in html)  # the session's cell
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the plot
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream" and o.name == "stdout")
    assert "pick: mobilenet_v1_0.25_128" in printed
    assert len(list((tmp_path / "results").iterdir())) == 1  # one session, where the environment said
