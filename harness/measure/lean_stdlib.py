"""Stand-ins for the standard library modules the runner cannot afford to import: json.loads and json.dumps (their
defaults), and contextlib.suppress.

Every run's runner starts inside the run's measured window, and `import json` cost it a third of its imports: the
json package imports re (and re imports enum) only to skip whitespace. The C accelerator that json itself calls,
_json, needs neither, so the runner calls it directly with json's default settings. Where _json is missing or does not
take these arguments (an interpreter other than CPython), the json package is used instead: same output, slower start.
contextlib imports collections and functools, for one small class.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

WHITESPACE = " \t\n\r"  # what JSON allows around a value
CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


class _Defaults:
    """The attributes json.JSONDecoder() gives its scanner."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = CONSTANTS.__getitem__


def _not_serializable(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _accelerated() -> tuple[Callable[[str, int], tuple[Any, int]], Callable[[Any, int], Any]] | None:
    """(scanner, encoder) from _json, set up as json.loads and json.dumps set them up; None where it cannot be."""
    try:
        import _json

        scanner = _json.make_scanner(_Defaults())
        encoder = _json.make_encoder({}, _not_serializable, _json.encode_basestring_ascii, None, ": ", ", ", False,
                                     False, True)
        if encoder({"a": [1, 2.5, None, True, "é"]}, 0) is None:  # a signature that changed would fail here
            return None
    except (ImportError, AttributeError, TypeError):
        return None
    return scanner, encoder


_ACCELERATED = _accelerated()


def loads(text: str) -> Any:
    """json.loads(text). Malformed text raises ValueError (json.JSONDecodeError, which imports json then)."""
    if _ACCELERATED is None:
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip(WHITESPACE))
    try:
        value, end = _ACCELERATED[0](text, start)
    except StopIteration as err:
        raise _error("Expecting value", text, err.value) from None
    if text[end:].strip(WHITESPACE):
        raise _error("Extra data", text, end)
    return value


def dumps(value: Any) -> str:
    """json.dumps(value)."""
    if _ACCELERATED is None:
        import json

        return json.dumps(value)
    if isinstance(value, str):
        import _json

        return _json.encode_basestring_ascii(value)
    return "".join(_ACCELERATED[1](value, 0))


def _error(message: str, text: str, position: int) -> ValueError:
    """The error json raises, built only when text is malformed (a torn metrics line)."""
    from json import JSONDecodeError

    return JSONDecodeError(message, text, position)


class suppress:  # noqa: N801 (named as the contextlib.suppress it stands for)
    """contextlib.suppress."""

    def __init__(self, *errors: type[BaseException]) -> None:
        self.errors = errors

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> bool:
        return kind is not None and issubclass(kind, self.errors)
