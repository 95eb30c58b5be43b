"""What the lab's hosts' services start with (chaos.stack.lab): not the harness's terminal size."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from chaos.stack import lab


class _Started:
    """subprocess.Popen's stand-in: records what a spawn would have started (the unit lane starts nothing)."""

    seen: list[dict[str, Any]] = []

    def __init__(self, cmd: list[str], **kw: Any) -> None:
        _Started.seen.append({"cmd": cmd, **kw})
        self.pid = 4242


def test_a_hosts_services_do_not_inherit_columns_or_lines(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """dockerd hands its environment to the `ps` behind `docker top`: with COLUMNS=80 (a pytest-xdist
    worker has it from the controller's readline) every process line came back cut at 80 columns."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("LINES", "24")
    monkeypatch.setenv("LAB_ENV_PROBE", "kept")
    monkeypatch.setattr(subprocess, "Popen", _Started)
    _Started.seen.clear()
    assert lab.Lab(tmp_path).spawn("dockerd", ["dockerd"], lab.GPU, env={"EXTRA": "1"}) == 4242
    env = _Started.seen[-1]["env"]
    assert "COLUMNS" not in env and "LINES" not in env, sorted(env)
    assert env["LAB_ENV_PROBE"] == "kept" and env["EXTRA"] == "1"  # the rest of the harness's environment stays
    assert _Started.seen[-1]["start_new_session"] is True
