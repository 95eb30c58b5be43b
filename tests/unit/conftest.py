"""The unit lane (`make test-unit`) and its guard: a test under tests/unit that opens a socket connection,
binds a port or starts a process fails at once, naming what it tried; such a test belongs in an integration lane."""
from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

_HINT = "tests/unit allows no process and no socket: move this test to tests/integration (or tests/standins)"


class UnitLaneViolation(AssertionError):
    """A unit-lane test reached for a socket or a process."""


def _refuse(what: str) -> Any:
    def refuse(*args: object, **kwargs: object) -> Any:
        # args[0] is the socket or the half-made Popen (whose repr would fail): show what it was given
        shown = ", ".join(repr(a) for a in args[1:3])[:120] if what.startswith(("socket.socket", "subprocess")) \
            else ", ".join(repr(a) for a in args[:2])[:120]
        raise UnitLaneViolation(f"{what}({shown}) in a unit test: {_HINT}")
    return refuse


@pytest.fixture(autouse=True)
def _no_process_no_socket(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Refuse connect/bind on any socket family and every way of starting a process, for one test."""
    for name in ("connect", "connect_ex", "bind"):
        monkeypatch.setattr(socket.socket, name, _refuse(f"socket.socket.{name}"))
    monkeypatch.setattr(socket, "create_connection", _refuse("socket.create_connection"))
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("subprocess.Popen"))
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "execv", "execve", "execvp"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, _refuse(f"os.{name}"))
    yield
