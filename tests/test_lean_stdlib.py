"""The runner's stand-ins for json (its C accelerator, called without importing json) write and read what json does."""

from __future__ import annotations

import json
import math

import pytest

from harness.measure import lean_stdlib


def test_the_accelerator_is_used_here() -> None:
    assert lean_stdlib._ACCELERATED is not None


@pytest.mark.parametrize("value", [
    {"a": [1, 2.5, None, True, False, "é\n\"\\"], "b": {"c": -1e-300, "d": 10**30, "e": ""}}, [], {}, "x", 0.1,
    {"nan": math.nan, "inf": [math.inf, -math.inf]}, {1: "int key", 2.5: "float key", None: "null key"},
])
def test_lean_json_writes_and_reads_what_json_does(value: object) -> None:
    text = json.dumps(value)
    assert lean_stdlib.dumps(value) == text
    assert repr(lean_stdlib.loads(f" \n{text}\t")) == repr(json.loads(text))


@pytest.mark.parametrize("text", ["", "{", "[1] 2", '{"a": 1', "nope", '"a\tb"'])
def test_lean_json_refuses_what_json_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        lean_stdlib.loads(text)
