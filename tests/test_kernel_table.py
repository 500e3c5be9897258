"""The kernel table store, with a table made of a real per-op profile: written whole, read back, listed and shown by
`harness devices`, and a broken one refused in one line naming its file."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.per_op import TABLE_CSV, run_dir
from harness.cli import main
from harness.core import metric_registry
from harness.core.errors import DataError
from harness.kernels.designed import sample
from harness.kernels.designed_graphs import write_probe
from harness.kernels.table import (
    ROW_COLUMNS,
    KernelTable,
    find_kernel_table,
    kernel_tables,
    kernels_root,
    table_name,
    write_table,
)
from harness.store.results import list_sessions, load_runs

PROFILE_ARGS = ("--per-op", "--backend", "local", "--repeats", "1", "--iterations", "10", "--warmup", "2",
                "--cpus", "1")


@pytest.fixture(scope="module")
def real_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, KernelTable]:
    """A probe graph of four designed kernels profiled once with PER_OP=1, its per-op rows written as a table."""
    root = tmp_path_factory.mktemp("kernels")
    graph = write_probe(sample(4, seed=3), 0, root / "graphs", "onnxruntime")
    results = root / "results"
    assert main(["profile", "--json", "--results-dir", str(results), str(graph), *PROFILE_ARGS]) == 0
    session = list_sessions(results)[-1]
    run = load_runs(session)[0]
    rows = pd.read_csv(run_dir(session, run.run_id) / TABLE_CSV)
    rows = rows.assign(model=graph.name, source="designed", family="designed",
                       model_latency_ms=metric_registry.get(metric_registry.LATENCY).value(run.line),
                       graph=f"graphs/{graph.name}")
    meta = {"name": table_name("host", "onnxruntime", 1, "fp32"), "device": "host", "engine": "onnxruntime",
            "threads": 1, "cpus": 1.0, "precision": "fp32", "created": "2026-11-27T12:00:00Z", "probing_s": 12.5,
            "sessions": [session.name], "source": "harness probe", "cpu": "test cpu"}
    table = write_table(kernels_root(results) / meta["name"], meta, rows, {graph.name: graph})
    return results, table


def test_a_written_table_reads_back_whole(real_table: tuple[Path, KernelTable]) -> None:
    results, table = real_table
    rows = table.rows()
    assert list(rows.columns[:len(ROW_COLUMNS)]) == list(ROW_COLUMNS)
    assert set(rows["model"]) == {"probe_000.onnx"} and (rows["mean_ms"] > 0).any()
    kernels = {node.split("/")[0] for node in rows["onnx_node"].dropna()}
    assert len(kernels) >= 4  # the four designed kernels and the overhead nodes, each row named after its kernel
    assert (table.path / "graphs" / "probe_000.onnx").is_file()
    assert [t.name for t in kernel_tables(results)] == ["host-onnxruntime-1t-fp32"]
    found = find_kernel_table("host-onnxruntime-1t-fp32", results)
    assert found is not None and found.meta["sessions"] == table.meta["sessions"]
    assert find_kernel_table("nothing", results) is None
    provenance = table.provenance()
    assert provenance["rows"] == len(rows) and provenance["role"] == "kernels" and provenance["date"] == "2026-11-27"


def test_devices_lists_and_shows_a_kernel_table(real_table: tuple[Path, KernelTable],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    results, table = real_table
    assert main(["devices", "--json", "--results-dir", str(results)]) == 0
    listed = json.loads(capsys.readouterr().out)["kernel_tables"]
    assert [(row["name"], row["engine"], row["threads"], row["role"]) for row in listed] == [
        ("host-onnxruntime-1t-fp32", "onnxruntime", 1, "kernels")]
    assert main(["devices", "--results-dir", str(results)]) == 0
    out = capsys.readouterr().out
    assert "kernel tables in" in out and "kernels" in out  # its name may wrap in a narrow terminal
    assert main(["devices", "show", table.name, "--json", "--results-dir", str(results)]) == 0
    shown = json.loads(capsys.readouterr().out)
    counts = table.rows()["op_type"].value_counts()
    assert {kind: entry["rows"] for kind, entry in shown["kinds"].items()} == counts.to_dict()
    assert main(["devices", "show", table.name, "--results-dir", str(results)]) == 0
    assert "rows per op type" in capsys.readouterr().out


def test_a_broken_table_is_one_line_naming_its_file(real_table: tuple[Path, KernelTable], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    _, table = real_table
    broken = kernels_root(tmp_path) / "broken"
    broken.mkdir(parents=True)
    (broken / "kernel_table.json").write_text("{not json")
    with pytest.raises(DataError, match="kernel_table.json: not a readable kernel table"):
        kernel_tables(tmp_path)
    assert main(["devices", "--results-dir", str(tmp_path)]) != 0
    err = capsys.readouterr().err
    assert "broken/kernel_table.json" in err and "Traceback" not in err
    (broken / "kernel_table.json").write_text(json.dumps({**table.meta, "engine": "tvm"}))
    with pytest.raises(DataError, match="engine 'tvm' is not one of"):
        KernelTable.load(broken)
    (broken / "kernel_table.json").write_text(json.dumps({**table.meta, "name": "broken"}))
    (broken / "rows.csv").write_text("model,mean_ms\nx,1\n")
    with pytest.raises(DataError, match="lacks the columns node_index"):
        KernelTable.load(broken).rows()
