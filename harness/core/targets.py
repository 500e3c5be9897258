"""TARGET: `ssh://user@host[:port]` or `ssh://alias` (a Host of ~/.ssh/config), several separated by spaces (a farm
of boards of one kind). Parsed once, as data: no part of it ever reaches a shell. A run made on a board says so by
its backend, `ssh` (harness.backends.target)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from harness.core.errors import ConfigError

TARGET_BACKEND = "ssh"
"""The backend name of every run made on a board."""
FORM = "ssh://user@host[:port] or ssh://alias (a Host of ~/.ssh/config), several separated by spaces"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # host names, aliases, IPv4 addresses and user names
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Address:
    """One board: how ssh reaches it. `host` is a name, an address or an alias that ~/.ssh/config resolves."""

    host: str
    user: str | None = None
    port: int | None = None

    @property
    def url(self) -> str:
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"ssh://{user}{host}{port}"

    def ssh_args(self) -> list[str]:
        """ssh's arguments that name this board (after `--`-free options, before the remote command)."""
        return [*(["-p", str(self.port)] if self.port else []), *(["-l", self.user] if self.user else []), self.host]

    @property
    def label(self) -> str:
        """A name for files and device names: its host (and port where one is given), in safe characters."""
        text = self.host if self.port is None else f"{self.host}-{self.port}"
        return _SAFE.sub("-", text).strip("-") or "board"


def parse_address(text: str) -> Address:
    """One `ssh://...` value; ValueError naming what is wrong."""
    if not text.startswith("ssh://"):
        raise ValueError(f"{text!r} does not start with ssh://")
    parts = urlsplit(text)
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.password is not None:
        raise ValueError(f"{text!r} has more than user, host and port (no password, path or query)")
    host = parts.hostname or ""
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"{text!r} has a port that is not a number from 1 to 65535") from None
    user = parts.username
    if not host or not (_NAME.match(host) or _ipv6(host)):
        raise ValueError(f"{text!r} names no host (letters, digits, '.', '-' and '_')")
    if user is not None and not _NAME.match(user):
        raise ValueError(f"{text!r} has a user name with characters ssh would not take")
    if port == 0:
        raise ValueError(f"{text!r} has port 0")
    return Address(host, user, port)


def _ipv6(host: str) -> bool:
    return bool(re.fullmatch(r"[0-9A-Fa-f:.]+", host)) and ":" in host


def parse_targets(text: str) -> tuple[Address, ...]:
    """Every board of a TARGET value, in order, each once."""
    found: list[Address] = []
    for item in text.replace(",", " ").split():
        address = parse_address(item)
        if address not in found:
            found.append(address)
    return tuple(found)


def canonical_target(text: str) -> str:
    """TARGET's parser for the profile: the boards' URLs, space-separated (empty: this host). ValueError if bad."""
    return " ".join(address.url for address in parse_targets(text))


def target_addresses(text: str, source: str = "TARGET") -> tuple[Address, ...]:
    """The boards of a TARGET value, or one ConfigError naming it and the form it takes."""
    try:
        return parse_targets(text)
    except ValueError as err:
        raise ConfigError(f"{source}: {err}; expected {FORM}") from None


def is_target_run(run: Mapping[str, Any]) -> bool:
    """Whether a stored run ran on a board (TARGET), not on this host: a device's measurement, not the harness's."""
    return run.get("backend") == TARGET_BACKEND
