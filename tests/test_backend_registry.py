"""The BACKENDS registry: every name BACKEND accepts has a backend, and `auto` takes the first one its probe finds
usable here, saying why; the local backend is real (cgroups or rlimits), the Docker probe asks the real engine."""

from __future__ import annotations

import pytest

from harness.backends import BACKENDS, BY_NAME, select_backend
from harness.backends.local import LocalBackend
from harness.core.config import VARIABLES, load_profile


def test_backend_takes_exactly_auto_and_the_registered_names() -> None:
    parse, form = VARIABLES["BACKEND"][1], VARIABLES["BACKEND"][2]
    names = [kind.name for kind in BACKENDS]
    assert form == f"auto, {', '.join(names[:-1])} or {names[-1]}"
    assert [parse(name) for name in ("auto", *names)] == ["auto", *names]
    with pytest.raises(ValueError):
        parse("cluster")


def test_a_named_backend_is_built_by_its_factory() -> None:
    backend, reason = select_backend(load_profile(None, {"BACKEND": "local"}, {}))
    try:
        assert isinstance(backend, LocalBackend) and reason == "BACKEND=local"
    finally:
        backend.close()


def test_auto_takes_the_first_usable_backend_and_says_why() -> None:
    profile = load_profile(None, {"BACKEND": "auto"}, {})
    probes = [(kind.name, *kind.probe(profile)) for kind in BACKENDS]
    first = next(index for index, (_, usable, _) in enumerate(probes) if usable)
    backend, reason = select_backend(profile)
    try:
        assert backend.name == probes[first][0]
        unusable = "; ".join(why for _, _, why in probes[:first])
        assert reason == f"BACKEND=auto: {f'{backend.name}, since {unusable}' if unusable else probes[first][2]}"
    finally:
        backend.close()


def test_the_local_backend_can_always_run() -> None:
    assert BY_NAME["local"].probe(load_profile(None, {}, {}))[0] is True
    assert BACKENDS[-1] is BY_NAME["local"]  # so auto always finds one
