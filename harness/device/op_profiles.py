"""A device's per-operator profiles (from benchmark_model's op profiler): one per model and thread count, repeats
combined, stored as RESULTS_DIR/devices/<device>/per_op.json beside the measurements."""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.device.readings import OpTime, Reading
from harness.store.results import SCHEMA_VERSION, check_schema

PER_OP_FILE = "per_op.json"


@dataclass(frozen=True)
class DeviceOpProfile:
    """One model's node types on the device: mean ms per inference (the median over the logs that profiled it)
    and each type's share of the operators' time."""

    model: str
    cpus: float | None
    n: int
    sources: tuple[str, ...]
    ops: tuple[OpTime, ...]

    @property
    def total_ms(self) -> float:
        return sum(op.mean_ms for op in self.ops)

    def share(self, op: OpTime) -> float | None:
        return op.mean_ms / self.total_ms if self.total_ms > 0 else None

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "cpus": self.cpus, "n": self.n, "sources": list(self.sources),
                "ops": [{**asdict(op), "share": self.share(op)} for op in self.ops]}


def combine_op_profiles(readings: list[Reading]) -> list[DeviceOpProfile]:
    """The readings with a per-op profile, one profile per model and thread count: each node type's median ms
    over the repeats that ran it (its node count from the first), largest first."""
    groups: dict[tuple[str, float | None], list[Reading]] = {}
    for reading in readings:
        if reading.ops and reading.model:
            groups.setdefault((reading.model, reading.cpus), []).append(reading)
    profiles = []
    for (model, cpus), group in sorted(groups.items(), key=lambda item: (item[0][0], item[0][1] or 0.0)):
        by_type: dict[str, list[OpTime]] = {}
        for reading in group:
            for op in reading.ops:
                by_type.setdefault(op.node_type, []).append(op)
        ops = [OpTime(node_type, times[0].nodes, statistics.median(op.mean_ms for op in times))
               for node_type, times in by_type.items()]
        ops.sort(key=lambda op: -op.mean_ms)
        profiles.append(DeviceOpProfile(model, cpus, len(group), tuple(r.source for r in group), tuple(ops)))
    return profiles


def op_profiles_text(profiles: list[DeviceOpProfile]) -> str:
    return json.dumps({"schema_version": SCHEMA_VERSION, "profiles": [p.to_json() for p in profiles]}, indent=2) + "\n"


def load_op_profiles(directory: Path) -> list[DeviceOpProfile]:
    """The per-op profiles stored in a device's directory; none when its data came without any."""
    path = Path(directory) / PER_OP_FILE
    if not path.exists():
        return []
    stored = json.loads(path.read_text(encoding="utf-8"))
    check_schema(stored, str(path))
    return [DeviceOpProfile(p["model"], p["cpus"], p["n"], tuple(p["sources"]),
                            tuple(OpTime(op["node_type"], op["nodes"], op["mean_ms"]) for op in p["ops"]))
            for p in stored["profiles"]]
