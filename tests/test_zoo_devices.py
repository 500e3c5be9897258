"""Device presets: one per promised device, each loading cleanly and citing where its numbers come from."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from dotenv import dotenv_values

from harness.core.config import load_profile

DEVICES = Path(__file__).resolve().parent.parent / "devices"
PROMISED = ("lg-g6", "galaxy-s8", "jetson-nano", "raspberry-pi-4", "pixel-3")
TEMPLATE = Path(__file__).resolve().parent.parent / "env.template"


@pytest.mark.parametrize("device", PROMISED)
def test_preset_loads_and_cites_its_sources(device: str) -> None:
    path = DEVICES / f"{device}.env"
    values = dotenv_values(path, interpolate=False)
    assert {"DEVICE_NAME", "CPUS", "MEMORY"} <= set(values)
    assert set(values) <= set(dotenv_values(TEMPLATE)), "presets use env.template's variable names only"
    profile = load_profile(path)
    assert profile.warnings == ()
    assert profile.device_name == device
    assert profile.sources["CPUS"] == str(path) and profile.sources["MEMORY"] == str(path)
    text = path.read_text(encoding="utf-8")
    comments = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    assert re.search(r"^# CPU: .*\d", comments, re.MULTILINE), "the CPU comment names the core count"
    assert re.search(r"^# RAM: .*\d+ GB", comments, re.MULTILINE), "the RAM comment names the memory"
    assert re.search(r"https://\S+", comments), "a source URL for the numbers"
    assert f"ENV=devices/{device}.env" in comments
