"""The host's RAPL energy reader: its arithmetic (deltas, wraparound at max_energy_range_uj, several packages, the
parts of a package left out) on powercap counter files this test writes, the reasons it gives where no counter can
be read, and a real run's record, which holds the energy or why there is none, never a zero."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.cli import main
from harness.measure.launch import runner_command
from harness.measure.rapl import EnergyReader, delta_uj
from harness.store.results import list_sessions
from tests.helpers import profile_json, run_spec, session_runs

MAX_UJ = 262_143_328_850  # a real package's max_energy_range_uj


def write_domain(root: Path, domain: str, name: str, energy_uj: int, max_uj: int = MAX_UJ) -> Path:
    folder = root / domain
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "name").write_text(f"{name}\n")
    (folder / "max_energy_range_uj").write_text(f"{max_uj}\n")
    (folder / "energy_uj").write_text(f"{energy_uj}\n")
    return folder / "energy_uj"


def test_deltas_of_several_packages_across_a_wraparound(tmp_path: Path) -> None:
    """package-0 counts 12.5 J; package-1 wraps: from 1 J below its range to 0.5 J past 0, 1.5 J. The core domain
    (part of package-0) is not added again. 14 J over 40 inferences: 350 mJ each."""
    zero = write_domain(tmp_path, "intel-rapl:0", "package-0", 100_000_000)
    one = write_domain(tmp_path, "intel-rapl:1", "package-1", MAX_UJ - 1_000_000)
    core = write_domain(tmp_path, "intel-rapl:0:0", "core", 5_000_000)
    reader = EnergyReader(str(tmp_path))
    reader.start()
    zero.write_text("112500000\n")
    one.write_text("500000\n")
    core.write_text("9000000\n")
    record = reader.stop(40)
    assert record["domains"] == ["package-0", "package-1"]
    assert record["energy_j"] == 14.0
    assert record["energy_mj"] == 350.0
    assert record["avg_power_w"] == 14.0 / record["seconds"]
    assert record["whose"].startswith("RAPL package energy: shared by every core")
    assert delta_uj(10, 25, 100) == 15 and delta_uj(90, 5, 100) == 15


def test_no_readable_counter_gives_a_reason_and_no_number(tmp_path: Path) -> None:
    reader = EnergyReader(str(tmp_path / "powercap"))
    reader.start()
    record = reader.stop(10)
    assert set(record) == {"absent"} and "no RAPL package counter under" in record["absent"]
    write_domain(tmp_path, "intel-rapl:0", "package-0", 0).write_text("not a number\n")
    record = EnergyReader(str(tmp_path)).stop(10)
    assert set(record) == {"absent"} and "intel-rapl:0 cannot be read as a RAPL domain" in record["absent"]


def test_a_real_run_records_its_energy_or_why_there_is_none(tmp_path: Path, tiny_onnx: Path,
                                                            workloads: Path) -> None:
    """The runner as a backend starts it (rlimit isolation, so no cgroup is needed): the bench loop's run holds its
    RAPL energy where the host's counters are readable, else the reason; a script that does not use the bench
    loop says so."""
    spec = {**run_spec(workloads / "short_inference.py", "50", model=tiny_onnx).runner_input().to_dict(),
            "isolation": "rlimit"}
    results = []
    for script, args in (("short_inference.py", ["50"]), ("alloc.py", ["1", "0.05"])):
        spec_path, out = tmp_path / f"{script}.json", tmp_path / f"{script}.out.json"
        spec_path.write_text(json.dumps({**spec, "script": str(workloads / script), "script_args": args}))
        subprocess.run(runner_command(spec_path, out), check=True)
        results.append(json.loads(out.read_text()))
    looped, bare = results
    assert looped["status"] == bare["status"] == "ok"
    energy = looped["energy"]
    if "absent" in energy:
        assert set(energy) == {"absent"} and "RAPL" in energy["absent"] or "root only" in energy["absent"]
    else:
        assert energy["energy_j"] > 0 and energy["energy_mj"] == energy["energy_j"] * 1000 / 50
    assert bare["energy"] == {"absent": "the script did not report it: only the harness's timed_loop reads the "
                                        "host's RAPL counters"}


def test_every_stored_run_holds_its_energy_or_why_and_rank_says_why(
        capsys: pytest.CaptureFixture[str], in_tmp_cwd: Path, tiny_onnx: Path, workloads: Path) -> None:
    """Real sessions: each stored run's `energy` holds a number or the reason, and where no run has a number,
    `rank --metric energy_mj` refuses in one line that gives it and `check --metric energy_mj` skips with it."""
    results = in_tmp_cwd / "results"
    for _ in range(2):
        profile_json(capsys, results, str(tiny_onnx), "--backend", "local", "--repeats", "2", "--script",
                     str(workloads / "short_inference.py"), "--", "100")
    baseline = min(list_sessions(results))
    runs = session_runs(results)
    assert len(runs) == 2
    reasons = {run["energy"].get("absent") for run in runs}
    if reasons == {None}:
        assert all(run["energy"]["energy_mj"] > 0 for run in runs)
        return
    (reason,) = reasons
    assert reason and all(set(run["energy"]) == {"absent"} for run in runs)
    capsys.readouterr()
    assert main(["rank", "--metric", "energy_mj", "--results-dir", str(results)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no ok run reported energy_mj: {reason}; pick another --metric" in err
    assert main(["check", "--baseline", str(baseline), "--metric", "energy_mj", "--results-dir", str(results),
                 "--json"]) == 0
    (check,) = [c for c in json.loads(capsys.readouterr().out)["checks"] if c["check"] == "energy_mj"]
    assert check["verdict"] == "skip" and check["message"] == f"no ok run of the session reported energy_mj: {reason}"
