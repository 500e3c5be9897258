"""NAS-Bench-201's cells by name and by index, stdlib only: naming an architecture must not cost numpy or onnx.

A cell has four nodes; node i is the sum over j < i of op(j->i)(node j), and node 3 is its output. The cell string
`|op~0|+|op~0|op~1|+|op~0|op~1|op~2|` lists the ops into nodes 1, 2 and 3 (Dong & Yang, "NAS-Bench-201", ICLR
2020). The 15,625 cells in the benchmark's own index order are in data/nb201_cells.txt.gz (one line per index, the
six ops as digits of OPS), from the NAS-Bench-201 release as HELP (Lee et al., NeurIPS 2021, MIT licence) ships it;
`nb201_<index>` names the network of that index.
"""

from __future__ import annotations

import gzip
import re
from functools import cache
from pathlib import Path

from harness.core.errors import ModelError

OPS = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
"""The search space's operations, in NAS-Bench-201's order (a cell's digit in the index table)."""
EDGES = ((0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3))
"""(from node, to node) of each op in a cell string, in the string's order."""
ARCHITECTURES = 15625
_CELLS_FILE = Path(__file__).with_name("data") / "nb201_cells.txt.gz"
_CELL_PATTERN = re.compile(r"\|" + r"\|\+\|".join(
    "\\|".join(rf"(?P<e{index}>\w+)~{j}" for index, (j, i) in enumerate(EDGES) if i == node) for node in (1, 2, 3)
) + r"\|")


@cache
def _cells() -> tuple[str, ...]:
    with gzip.open(_CELLS_FILE, "rt") as handle:
        return tuple(line.strip() for line in handle)


def cell_ops(index: int) -> tuple[str, ...]:
    """The six ops of architecture `index`, in EDGES order."""
    if not 0 <= index < ARCHITECTURES:
        raise ModelError(f"NAS-Bench-201 index {index} is out of range; use 0..{ARCHITECTURES - 1}")
    return tuple(OPS[int(digit)] for digit in _cells()[index])


def cell_string(ops: tuple[str, ...]) -> str:
    """`|nor_conv_3x3~0|+|none~0|skip_connect~1|+|...|`: NAS-Bench-201's spelling of a cell."""
    nodes = ["|".join(f"{op}~{j}" for op, (j, i) in zip(ops, EDGES, strict=True) if i == node) for node in (1, 2, 3)]
    return "|" + "|+|".join(nodes) + "|"


def parse_cell(text: str) -> tuple[str, ...] | None:
    """The six ops of a cell string, or None when `text` is not one (an unknown op is an error naming them)."""
    found = _CELL_PATTERN.fullmatch(text)
    if found is None:
        return None
    ops = tuple(found.group(f"e{index}") for index in range(len(EDGES)))
    unknown = sorted(set(ops) - set(OPS))
    if unknown:
        raise ModelError(f"cell {text!r}: unknown op {', '.join(unknown)}; the ops are {', '.join(OPS)}")
    return ops


@cache
def _indices() -> dict[str, int]:
    return {digits: index for index, digits in enumerate(_cells())}


def index_of(ops: tuple[str, ...]) -> int:
    """The benchmark index of a cell (every one of the 5^6 cells has one), looked up, not searched: a search loop
    asks for thousands a second."""
    return _indices()["".join(str(OPS.index(op)) for op in ops)]
