"""Fixtures for target tests: a supervised tiny HTTP server on a free port."""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chaos.targets.process import ProcessTarget
from tests._support import free_port

TINY = str(Path(__file__).with_name("tinyserver.py"))


@pytest.fixture
def make_proc(tmp_path) -> Iterator[Callable[..., ProcessTarget]]:
    made: list[ProcessTarget] = []

    def make(*extra: str, name: str = "tiny", policy: str = "always", delay: float = 0.1,
             nice: int = 0) -> ProcessTarget:
        port = free_port()
        t = ProcessTarget(name, [sys.executable, TINY, str(port), *extra], port=port, restart_policy=policy,
                          restart_delay_s=delay, state_dir=tmp_path / "state", run_id="t", nice=nice)
        made.append(t)
        return t

    try:
        yield make
    finally:
        for t in made:
            t.remove()
