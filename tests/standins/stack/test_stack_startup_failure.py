"""A stack whose replicas die at their first request: `chaos env up` fails within a minute, naming a replica and
quoting the RuntimeError from its own log, instead of waiting out the cold-start SLA for a completion."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from chaos.env import load
from tests._support import require
from tests.standins.stack.stack_env import REPO, env_ports, stack_processes, write_env

ERROR = "RuntimeError: Unsupported CPU attention configuration: head_dim=64 isa=0"


@pytest.fixture
def dying_env(tmp_path: Path) -> Iterator[Path]:
    """The local stack on free ports, every replica with the simulator's step-error fault and the issue's 240 s wait."""
    require("toxiproxy")
    path = write_env(tmp_path)
    doc = yaml.safe_load(path.read_text())
    for t in doc["targets"]:
        t["simulator"]["extra_args"] = ["--fault", "step-error"]
    doc["slas"]["cold_start_s"] = 240
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    env = load(str(path))
    try:
        yield path
    finally:
        from chaos.faults.ledger import cleanup

        cleanup(env, force=True)
        for pid in stack_processes(str(tmp_path), env_ports(env)):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def test_env_up_names_the_dying_replica_and_its_error_within_60s(dying_env: Path, tmp_path: Path) -> None:
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "chaos.cli", "env", "up", "--env", str(dying_env)], capture_output=True,
                       text=True, cwd=REPO, timeout=200, stdin=subprocess.DEVNULL)
    took = time.monotonic() - t0
    out = r.stdout + r.stderr
    assert r.returncode == 2, out
    assert took < 60, f"took {took:.0f} s: {out}"
    errors = [line for line in r.stderr.splitlines() if line.startswith("chaos: error:")]
    assert len(errors) == 1, out
    assert "replica-a" in errors[0] or "replica-c" in errors[0], errors[0]
    assert "before the stack served" in errors[0] and ERROR in errors[0], errors[0]
    env = load(str(dying_env))
    assert not stack_processes(str(tmp_path), env_ports(env)), "the failed start left processes behind"
