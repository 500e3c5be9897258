"""A board's energy from its hwmon sensors (harness.measure.power_rails), read from real files laid out as the
kernel lays them out: an INA3221's rails (a Jetson's), a power sensor in microwatts, and an energy counter."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness.measure.power_rails import PowerRails, channels


def sensor(root: Path, name: str, **files: str) -> Path:
    folder = root / f"hwmon{len(list(root.iterdir())) if root.exists() else 0}"
    folder.mkdir(parents=True)
    (folder / "name").write_text(f"{name}\n")
    for file, value in files.items():
        (folder / file).write_text(f"{value}\n")
    return folder


def test_a_jetsons_input_rail_alone_is_integrated_over_the_phase(tmp_path: Path) -> None:
    sensor(tmp_path, "ina3221", in1_label="VDD_IN", in1_input="5000", curr1_input="1000",
           in2_label="VDD_CPU_GPU_CV", in2_input="5000", curr2_input="400")  # 5 V × 1 A = 5 W in; the CPU rail is part
    assert [channel.name for channel in channels(str(tmp_path))] == ["ina3221:VDD_IN"]
    rails = PowerRails(str(tmp_path), interval_s=0.01)
    rails.start()
    time.sleep(0.3)
    record = rails.stop(inferences=10)
    assert record["avg_power_w"] == pytest.approx(5.0, rel=0.02)
    assert record["energy_j"] == pytest.approx(5.0 * record["seconds"], rel=0.05)
    assert record["energy_mj"] == pytest.approx(record["energy_j"] * 100, rel=1e-9) and record["samples"] > 10


def test_power_in_microwatts_follows_a_change_mid_phase(tmp_path: Path) -> None:
    folder = sensor(tmp_path, "soc_power", power1_input="2000000")  # 2 W, then 4 W
    rails = PowerRails(str(tmp_path), interval_s=0.01)
    rails.start()
    time.sleep(0.2)
    (folder / "power1_input").write_text("4000000\n")
    time.sleep(0.2)
    record = rails.stop(inferences=1)
    assert 2.5 < record["avg_power_w"] < 3.5 and record["domains"] == ["soc_power:power1"]


def test_an_energy_counter_is_read_at_both_ends(tmp_path: Path) -> None:
    folder = sensor(tmp_path, "amd_energy", energy1_input="1000000", power1_input="9000000")
    rails = PowerRails(str(tmp_path))
    rails.start()
    (folder / "energy1_input").write_text("3500000\n")  # 2.5 J later
    record = rails.stop(inferences=5)
    assert record["energy_j"] == pytest.approx(2.5) and record["energy_mj"] == pytest.approx(500.0)


def test_no_sensor_says_why(tmp_path: Path) -> None:
    sensor(tmp_path, "coretemp", temp1_input="45000")
    record = PowerRails(str(tmp_path)).stop(inferences=1)
    assert record == {"absent": f"no hwmon energy, power or rail channel under {tmp_path}"}
