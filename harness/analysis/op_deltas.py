"""Per-op-type deltas between two per-op profiles (`harness compare A B --per-op`): which operators the
quantization, the extra cores or the new architecture actually sped up or slowed down. `harness ops MODEL
--by type` shows the same deltas between the CPUS values of one session.

Op types are compared by family, since a quantized graph runs the same layer under another name
(Conv -> QLinearConv or ConvInteger, MatMul -> MatMulInteger, Add -> QLinearAdd); each row lists the types
of each side. Times are mean ms per inference over every profiled inference of the model at that CPUS.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from rich.table import Table

from harness.analysis.model_runs import profiled_runs
from harness.analysis.per_op import BETWEEN_OPS, OUTSIDE_RUN, PerOp, pooled
from harness.core.errors import DataError

FAMILY_PREFIXES = ("QLinear", "Q", "Fused", "Dynamic")
FAMILY_SUFFIXES = ("Integer",)


def op_family(op_type: str) -> str:
    """QLinearConv, ConvInteger, FusedConv -> Conv; QGemm -> Gemm; QuantizeLinear and the gap rows stay themselves."""
    if op_type in (BETWEEN_OPS, OUTSIDE_RUN):
        return op_type
    for prefix in FAMILY_PREFIXES:
        if op_type.startswith(prefix) and len(op_type) > len(prefix) and op_type[len(prefix)].isupper():
            op_type = op_type[len(prefix):]
    for suffix in FAMILY_SUFFIXES:
        op_type = op_type.removesuffix(suffix) or op_type
    return op_type


def _families(by_type: pd.DataFrame) -> pd.DataFrame:
    frame = by_type.assign(family=by_type["op_type"].map(op_family))
    return frame.groupby("family").agg(types=("op_type", lambda t: ", ".join(sorted(t))), ms=("mean_ms", "sum"))


def op_deltas(a: PerOp, b: PerOp) -> dict[str, Any]:
    """Rows (family, types of A and B, ms of A and B, B - A, B/A), the largest change first, and both totals."""
    joined = _families(a.by_type).merge(_families(b.by_type), how="outer", left_index=True, right_index=True,
                                        suffixes=("_a", "_b"))
    joined[["ms_a", "ms_b"]] = joined[["ms_a", "ms_b"]].fillna(0.0)
    joined["delta_ms"] = joined["ms_b"] - joined["ms_a"]
    joined["ratio"] = (joined["ms_b"] / joined["ms_a"]).where(joined["ms_a"] > 0)
    joined = joined.reindex(joined["delta_ms"].abs().sort_values(ascending=False).index).reset_index()
    rows = [{key: (None if pd.isna(value) else value) for key, value in row.items()}
            for row in joined.to_dict(orient="records")]
    return {"rows": rows, "coverage": [a.coverage["line"], b.coverage["line"]],
            "totals_ms": [a.coverage["profiled_latency_ms"], b.coverage["profiled_latency_ms"]]}


def per_op_deltas(results_dir: Path, model_a: str, model_b: str, cpus: float) -> dict[str, Any]:
    """op_deltas of two models at one CPUS value, each from the newest session that profiled it per op."""
    sides = []
    for model in (model_a, model_b):
        session_dir, runs = profiled_runs(results_dir, model, None)
        at_cpus = [r for r in runs if float(r["cpus"]) == cpus]
        if not at_cpus:
            raise DataError(f"{model} has no per-op runs at CPUS={cpus:g} in session {session_dir.name}; "
                            f"run `harness profile {model} --per-op --cpus {cpus:g}`")
        sides.append((session_dir.name, pooled(session_dir, at_cpus)))
    (session_a, a), (session_b, b) = sides
    return {"cpus": cpus, "sessions": [session_a, session_b], **op_deltas(a, b)}


def deltas_table(deltas: dict[str, Any], label_a: str, label_b: str, title: str) -> Table:
    """B against A per op family; A and B are two models at one CPUS, or one model at two CPUS values."""
    table = Table(title=f"per-op time by op type · {title} · mean ms per inference under the profiler · "
                        "largest change first", title_justify="left")
    for heading in ("op family", f"types in {label_a}", f"types in {label_b}", "A ms", "B ms", "B − A ms", "B/A"):
        table.add_column(heading, justify="left" if heading.startswith(("op", "types")) else "right")
    for row in deltas["rows"]:
        ratio = f"{row['ratio']:.2f}x" if row["ratio"] is not None else "new"
        table.add_row(row["family"], row["types_a"] or "—", row["types_b"] or "—", f"{row['ms_a']:.3f}",
                      f"{row['ms_b']:.3f}", f"{row['delta_ms']:+.3f}", ratio)
    total_a, total_b = deltas["totals_ms"]
    table.add_row("total (profiled latency)", "", "", f"{total_a:.3f}", f"{total_b:.3f}", f"{total_b - total_a:+.3f}",
                  f"{total_b / total_a:.2f}x" if total_a else "—", style="bold")
    return table
