"""A model's per-op profile on the device beside the harness's, kind by kind (harness.analysis.op_kinds): which
operators the device runs relatively slower than the harness does.

Each side's time per kind is its share of that side's operator time (the device's node-type table; the harness's
operator rows, without its between-ops and outside-the-run gaps). The share ratio, device share / harness share,
is above 1 for the kinds that take a larger part of the device's time than of the harness's: the device is
relatively slower at them than at the model as a whole. It is what the `ops` calibration fit exploits for
depthwise convolutions. Times are mean ms per inference on each side; `ms ratio` is device ms / harness ms.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from rich.table import Table

from harness.analysis.op_kinds import device_kind, harness_kind
from harness.analysis.per_op import BETWEEN_OPS, OUTSIDE_RUN, PerOp
from harness.core.errors import DataError
from harness.device.data import DeviceData
from harness.device.op_profiles import DeviceOpProfile


def device_profile_for(device: DeviceData, harness_model: str, cpus: float) -> DeviceOpProfile | None:
    """The device's per-op profile of `harness_model` (names matched as calibration matches them): the one at as
    many threads as the harness's CPUS, else one without a thread count, else the only one there is."""
    mapping = device.match([harness_model])
    profiles = [p for p in device.op_profiles if mapping.get(p.model) == harness_model]
    for wanted in (cpus, None):
        found = [p for p in profiles if p.cpus == wanted]
        if found:
            return found[0]
    return profiles[0] if len(profiles) == 1 else None


def require_device_profile(device: DeviceData, harness_model: str, cpus: float) -> DeviceOpProfile:
    profile = device_profile_for(device, harness_model, cpus)
    if profile is None:
        known = ", ".join(sorted({p.model for p in device.op_profiles})) or "none"
        raise DataError(f"device {device.name} has no per-op profile of {harness_model} (it has: {known}); import a "
                        "benchmark_model log run with --enable_op_profiling=true (docs/device-logs.md)")
    return profile


def _flag(value: Any) -> bool:
    """A table cell that is True (a numpy or Python bool), not None or NaN."""
    return isinstance(value, (bool, np.bool_)) and bool(value)


def _kinds(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    total = frame["ms"].sum()
    return frame.groupby("kind").agg(**{f"types_{name}": ("type", lambda t: ", ".join(sorted(set(t)))),
                                        f"ms_{name}": ("ms", "sum")}).assign(
        **{f"share_{name}": lambda f: f[f"ms_{name}"] / total if total > 0 else float("nan")})


def operator_kinds(per_op: PerOp) -> pd.DataFrame:
    """A harness per-op table's operator rows (no gaps) as kind, type and mean ms per inference."""
    ops = per_op.table[~per_op.table["op_type"].isin([BETWEEN_OPS, OUTSIDE_RUN])]
    kinds = [harness_kind(op_type, _flag(depthwise)) for op_type, depthwise in zip(ops["op_type"], ops["depthwise"],
                                                                                   strict=True)]
    return pd.DataFrame({"kind": kinds, "type": ops["op_type"], "ms": ops["mean_ms"]})


def compare_engines(tables: dict[str, PerOp]) -> dict[str, Any]:
    """One model's per-op tables on several engines, kind by kind: each engine's types, ms and share of its operator
    time; the larger share first, and each engine's operator total."""
    sides = {engine: operator_kinds(per_op) for engine, per_op in tables.items()}
    joined = pd.concat([_kinds(side, engine) for engine, side in sides.items()], axis=1)
    for engine in sides:
        joined[[f"ms_{engine}", f"share_{engine}"]] = joined[[f"ms_{engine}", f"share_{engine}"]].fillna(0.0)
    order = joined[[f"share_{engine}" for engine in sides]].max(axis=1).sort_values(ascending=False).index
    rows = [{key: (None if pd.isna(value) else value) for key, value in row.items()}
            for row in joined.reindex(order).reset_index().to_dict(orient="records")]
    return {"engines": list(sides), "rows": rows,
            "totals_ms": {engine: float(side["ms"].sum()) for engine, side in sides.items()}}


def engines_table(comparison: dict[str, Any], title: str) -> Table:
    """Kind by kind: each engine's ms and share of its operator time."""
    engines = comparison["engines"]
    table = Table(title=f"per-op time on each engine · {title} · share of each engine's operator time",
                  title_justify="left")
    table.add_column("op kind")
    for engine in engines:
        table.add_column(f"{engine} ms", justify="right")
        table.add_column(f"{engine} share", justify="right")
    for row in comparison["rows"]:
        table.add_row(row["kind"], *(cell for engine in engines
                                     for cell in (f"{row[f'ms_{engine}']:.3f}", _share(row[f"share_{engine}"]))))
    table.add_row("total (operators)", *(cell for engine in engines
                                         for cell in (f"{comparison['totals_ms'][engine]:.3f}", "100%")), style="bold")
    return table


def compare_device(device: DeviceOpProfile, harness: PerOp) -> dict[str, Any]:
    """Rows (kind, types and ms and share on each side, share and ms ratios), the larger share first, and totals."""
    harness_side = operator_kinds(harness)
    device_side = pd.DataFrame({"kind": [device_kind(op.node_type) for op in device.ops],
                                "type": [op.node_type for op in device.ops], "ms": [op.mean_ms for op in device.ops]})
    joined = _kinds(device_side, "device").join(_kinds(harness_side, "harness"), how="outer")
    for column in ("ms_device", "ms_harness", "share_device", "share_harness"):
        joined[column] = joined[column].fillna(0.0)
    joined["share_ratio"] = (joined["share_device"] / joined["share_harness"]).where(joined["share_harness"] > 0)
    joined["ms_ratio"] = (joined["ms_device"] / joined["ms_harness"]).where(joined["ms_harness"] > 0)
    order = joined[["share_device", "share_harness"]].max(axis=1).sort_values(ascending=False).index
    rows = [{key: (None if pd.isna(value) else value) for key, value in row.items()}
            for row in joined.reindex(order).reset_index().to_dict(orient="records")]
    totals = {"device_ms": float(device_side["ms"].sum()), "harness_ms": float(harness_side["ms"].sum())}
    return {"device_model": device.model, "device_cpus": device.cpus, "device_repeats": device.n, "rows": rows,
            "totals_ms": totals}


def _share(value: float | None) -> str:
    return f"{value:.1%}" if value is not None else "—"


def device_table(comparison: dict[str, Any], title: str) -> Table:
    """Kind by kind: the types on each side, ms and share of operator time on each, and the ratios."""
    table = Table(title=f"per-op time on the device and in the harness · {title} · share of each side's operator "
                        "time · share ratio > 1: the device is relatively slower at it", title_justify="left")
    for heading in ("op kind", "device types", "harness types", "device ms", "harness ms", "device share",
                    "harness share", "share ratio", "ms ratio"):
        table.add_column(heading, justify="left" if heading.endswith(("kind", "types")) else "right")
    for row in comparison["rows"]:
        ratio = ("device only" if row["share_ratio"] is None else
                 "harness only" if not row["share_device"] else f"{row['share_ratio']:.2f}")
        table.add_row(row["kind"], row["types_device"] or "—", row["types_harness"] or "—", f"{row['ms_device']:.3f}",
                      f"{row['ms_harness']:.3f}", _share(row["share_device"]), _share(row["share_harness"]), ratio,
                      f"{row['ms_ratio']:.2f}" if row["ms_ratio"] else "—")
    device_ms, harness_ms = comparison["totals_ms"]["device_ms"], comparison["totals_ms"]["harness_ms"]
    table.add_row("total (operators)", "", "", f"{device_ms:.3f}", f"{harness_ms:.3f}", "100%", "100%", "",
                  f"{device_ms / harness_ms:.2f}" if harness_ms else "—", style="bold")
    return table
