"""Fusion rules per engine, learned from the engine's own per-op profiles rather than kept by hand.

An engine's per-op table names, for each row, the ONNX node it was joined to (harness.analysis.per_op: `onnx_node`).
A graph node that no row names was run inside a neighbouring row: the kernel of the node that produced its input,
or of its one reader where that reader also reads the node's input (below). Counted over profiled models, per
(absorbed op type, the kernel's anchor op type, whether the producer's output had that node as its only reader,
whether all the node's inputs come from inside that kernel), and per op type for a node that repeats an earlier
node's op on the same inputs (anchor IDENTICAL), per op type for an element-wise node whose one reader also reads
its input, counted against that reader (anchor READ_BY + its op type: x·σ(x) runs as one QuickGelu named after the
Mul), and pooled over every element-wise node in each context (op ELEMENTWISE):
- `absorbed`: times the node ran inside the producer's kernel; `kept`: times it had a row of its own;
a rule applies where absorbed ≥ kept (harness.kernels.detect.MIN_RATE). A node with no producer and no row was
dropped (constant-folded): `dropped` per op type against `kept_sourceless`.

Rows that name no graph node are kernels the engine inserted; for onnxruntime, its NCHWc layout conversions
(ReorderInput, ReorderOutput). Learned for them: the block (the largest power of two dividing the output channels of
every blocked convolution: rows whose node name ends `_nchwc`), the op types that run blocked (`blocked_types`:
rows with that suffix), per convolution configuration (conv_key) how often it ran blocked (from the models' rows
and, where given, a probe's designed kernels: the only evidence of grouped convolutions of 16 channels a group or
more), and the op types that follow their inputs into the blocked layout (`following`: an op
type, marked `(broadcast)` where an input is broadcast over the spatial axes: harness.kernels.graph.Graph.layout_key),
chosen one at a time while they bring the predicted count of conversions closer to the counted one over the profiled
models.

The rules are stored as JSON in this package, one file per engine and layout block (fusion_rules_<engine>_block<N>.json:
onnxruntime blocks by 8 channels on an AVX2 host and by 16 on an AVX-512 one; load_rules takes this host's), each with
its evidence (rows, models) and the command that regenerates them (harness.kernels.learn: `python -m
harness.kernels.learn SESSION_DIR... [KERNEL_TABLE...] --engine E`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from harness.core.errors import ConfigError

RULES_DIR = Path(__file__).resolve().parent
BLOCKED_MARK = "_nchwc"
REGENERATE = "python -m harness.kernels.learn SESSION_DIR [SESSION_DIR ...] [KERNEL_TABLE ...] --engine onnxruntime"
Key = tuple[str, str, bool, bool]
IDENTICAL = "(identical node)"
"""The anchor of a node that repeats an earlier node's op on the same inputs: an engine that merges common
subexpressions runs it inside that node's kernel."""
ELEMENTWISE = "(element-wise)"
"""The op of a pooled count over every element-wise node (harness.kernels.graph.Graph.elementwise) in one context:
an element-wise op type the profiles never showed there (a LeakyRelu, a HardSwish of a family never profiled)
follows what the others did."""
READ_BY = "(read by) "
"""The anchor prefix of a node counted against the one node that reads it, where that reader also reads the node's
own input (x·σ(x), a SiLU): onnxruntime runs the pair as one QuickGelu kernel named after the reader (Graph.reader)."""
ConvKey = tuple[str, int, int, bool]
"""(dense | depthwise | grouped, input channels' alignment, output channels', fewer input channels than a block)."""


@dataclass(frozen=True)
class Rules:
    engine: str
    absorb: dict[Key, dict[str, int]]
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)
    block: int = 0
    blocked_types: frozenset[str] = frozenset()
    following: frozenset[str] = frozenset()
    conv_layout: dict[ConvKey, dict[str, int]] = field(default_factory=dict)
    inserted_in: str = "ReorderInput"
    inserted_out: str = "ReorderOutput"
    meta: dict[str, Any] = field(default_factory=dict)

    def drop_rate(self, op_type: str) -> float:
        entry = self.dropped.get(op_type)
        return entry["dropped"] / (entry["dropped"] + entry["kept"]) if entry else 0.0

    def runs_blocked(self, key: ConvKey) -> bool:
        """Whether a convolution of this layout key ran blocked at least as often as plain; a key no profile showed
        takes the counts of its grouping, input alignment and input count at every output alignment (the engine
        pads the output to the block, so whether it blocks follows the input: GhostNet 0.5's 8-channel convolutions
        to 4 and 12-channel ones to 2 ran blocked, keys no other family had), and plain where none showed those."""
        counts = self.conv_layout.get(key)
        if counts is None:
            grouping, align_in, _, fewer = key
            near = [c for (g, a, _, f), c in self.conv_layout.items() if (g, a, f) == (grouping, align_in, fewer)]
            counts = {name: sum(c[name] for c in near) for name in ("blocked", "plain")} if near else None
        return counts is not None and counts["blocked"] >= counts["plain"]

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine, "regenerate": REGENERATE, **self.meta,
            "absorb": [{"op": op, "anchor": anchor, "sole_reader": sole, "inputs_all_inside": inside, **counts}
                       for (op, anchor, sole, inside), counts in sorted(self.absorb.items())],
            "dropped": [{"op": op, **counts} for op, counts in sorted(self.dropped.items())],
            "layout": {"block": self.block, "blocked_types": sorted(self.blocked_types),
                       "following": sorted(self.following), "inserted_in": self.inserted_in,
                       "inserted_out": self.inserted_out,
                       "conv": [{"grouping": g, "align_in": a, "align_out": b, "fewer_in_than_block": f, **counts}
                                for (g, a, b, f), counts in sorted(self.conv_layout.items())]},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Rules:
        layout = data.get("layout", {})
        meta = {k: v for k, v in data.items() if k not in ("engine", "absorb", "dropped", "layout", "regenerate")}
        absorb = {(e["op"], e["anchor"], bool(e["sole_reader"]), bool(e["inputs_all_inside"])):
                  {"absorbed": e["absorbed"], "kept": e["kept"], "models": e.get("models", 0)}
                  for e in data.get("absorb", [])}
        conv = {(e["grouping"], e["align_in"], e["align_out"], e["fewer_in_than_block"]):
                {"blocked": e["blocked"], "plain": e["plain"]} for e in layout.get("conv", [])}
        return cls(data["engine"], absorb,
                   {e["op"]: {"dropped": e["dropped"], "kept": e["kept"]} for e in data.get("dropped", [])},
                   int(layout.get("block", 0)), frozenset(layout.get("blocked_types", [])),
                   frozenset(layout.get("following", [])), conv, layout.get("inserted_in", "ReorderInput"),
                   layout.get("inserted_out", "ReorderOutput"), meta)


def rules_path(engine: str, block: int) -> Path:
    """Where an engine's rules learned at a layout block are stored (block 0: an engine with no blocked layout)."""
    return RULES_DIR / f"fusion_rules_{engine}_block{block}.json"


def host_block(engine: str) -> int:
    """The channel block `engine` lays kernels out in on this host: onnxruntime's MLAS blocks its NCHWc layout by 16
    channels where the CPU has AVX-512F and by 8 where it has AVX2 (0 where the flags cannot be read). Which layout
    conversions the engine inserts follows from the block, so rules learned at one block misplace them at the
    other: on an AVX-512 host, the block-8 rules put MobileNetV1 0.25's conversions one short."""
    if engine != "onnxruntime":
        return 0
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 0
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), [])
    return 16 if "avx512f" in flags else 8 if "avx2" in flags else 0


def learned_engines() -> list[str]:
    """The engines whose rules are stored, at any block."""
    return sorted({p.stem.removeprefix("fusion_rules_").rsplit("_block", 1)[0]
                   for p in RULES_DIR.glob("fusion_rules_*.json")})


@cache
def load_rules(engine: str) -> Rules:
    """The stored rules of an engine, learned at this host's layout block (host_block) where they are stored,
    else at the nearest block stored; one clear line where none were learned for the engine."""
    stored = {int(p.stem.rsplit("_block", 1)[1]): p for p in RULES_DIR.glob(f"fusion_rules_{engine}_block*.json")}
    if not stored:
        raise ConfigError(f"no fusion rules for engine {engine!r}; rules are learned for: "
                          f"{', '.join(learned_engines())} (learn them with `{REGENERATE}`)")
    host = host_block(engine)
    block = min(stored, key=lambda b: (abs(b - host), b))
    return Rules.from_json(json.loads(stored[block].read_text(encoding="utf-8")))


def alignment(channels: int, block: int) -> int:
    """The largest power of two, up to the block, that divides a channel count."""
    return min(channels & -channels, block) if channels > 0 else 0


def conv_key(config: dict[str, float], block: int) -> ConvKey:
    """A convolution's layout key: its grouping, its input and output channels' alignments (a grouped convolution's
    per group: onnxruntime blocks one only where each group's channels fill whole blocks, so RegNetX-400MF's groups
    of 16 ran blocked at block 16 and RegNetY-400MF's groups of 8 plain, at the same total alignments), and whether it
    reads fewer input channels than a block."""
    groups, cin, cout = int(config["groups"]), int(config["cin"]), int(config["cout"])
    grouping = "dense" if groups == 1 else "depthwise" if groups == cin else "grouped"
    per = groups if grouping == "grouped" else 1
    return grouping, alignment(cin // per, block), alignment(cout // per, block), cin < block


def markdown(rules: Rules) -> str:
    """The rules as the Markdown tables docs/kernels.md shows: the absorptions that apply, with their evidence, and
    the layout rules."""
    lines = ["| node | absorbed into a kernel anchored at | producer's only reader | all inputs inside | absorbed "
             "| kept apart | models |", "|---|---|---|---|---|---|---|"]
    for (op, anchor, sole, inside), counts in sorted(rules.absorb.items()):
        if counts["absorbed"] >= counts["kept"] and counts["absorbed"]:
            lines.append(f"| {op} | {anchor} | {'yes' if sole else 'no'} | {'yes' if inside else 'no'} "
                         f"| {counts['absorbed']} | {counts['kept']} | {counts.get('models', '')} |")
    blocked = ", ".join(sorted(rules.blocked_types))
    lines += ["", f"Blocked layout: block {rules.block}; op types run blocked: {blocked};"
              f" op types that follow their inputs into it: {', '.join(sorted(rules.following)) or 'none'}.", "",
              "| convolution | input channels' alignment | output channels' | fewer inputs than a block | blocked "
              "| plain |", "|---|---|---|---|---|---|"]
    for (grouping, align_in, align_out, fewer), counts in sorted(rules.conv_layout.items()):
        lines.append(f"| {grouping} | {align_in} | {align_out} | {'yes' if fewer else 'no'} | {counts['blocked']} "
                     f"| {counts['plain']} |")
    meta = rules.meta
    lines += ["", f"Evidence: {meta.get('rows', '?')} per-op rows of {len(meta.get('models', []))} models; the "
              f"inserted conversions predicted for them are off by {meta.get('inserted_count_error', '?')} of "
              f"{meta.get('inserted_rows', '?')}. Regenerate: `{REGENERATE}`."]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    print(markdown(load_rules(sys.argv[1] if len(sys.argv) > 1 else "onnxruntime")))
