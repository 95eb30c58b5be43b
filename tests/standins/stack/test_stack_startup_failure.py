"""A stack whose replicas die at their first request: `chaos env up` fails within a minute, naming a replica and
quoting the RuntimeError from its own log, instead of waiting out the cold-start SLA for a completion. With every
replica dying no completion gets through; with one, the gateway serves through the other and the dying one is
found when it is asked to serve on its own."""
from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from chaos.env import load
from tests._support import require
from tests.standins.stack.stack_env import REPO, env_ports, kill_stack_processes, stack_processes, write_env

ERROR = "RuntimeError: Unsupported CPU attention configuration: head_dim=64 isa=0"


@pytest.fixture(params=[("replica-a", "replica-c"), ("replica-c",)], ids=["every-replica", "one-replica"])
def dying_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, tuple[str, ...]]]:
    """The local stack on free ports, these replicas with the simulator's step-error fault, the issue's 240 s wait."""
    require("toxiproxy")
    dying: tuple[str, ...] = request.param
    path = write_env(tmp_path)
    doc = yaml.safe_load(path.read_text())
    for t in doc["targets"]:
        if t["name"] in dying:
            t["simulator"]["extra_args"] = ["--fault", "step-error"]
    doc["slas"]["cold_start_s"] = 240
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    env = load(str(path))
    try:
        yield path, dying
    finally:
        from chaos.faults.ledger import cleanup

        cleanup(env, force=True)
        kill_stack_processes(str(tmp_path), env_ports(env))


def test_env_up_names_the_dying_replica_and_its_error_within_60s(dying_env: tuple[Path, tuple[str, ...]],
                                                                 tmp_path: Path) -> None:
    path, dying = dying_env
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "chaos.cli", "env", "up", "--env", str(path)], capture_output=True,
                       text=True, cwd=REPO, timeout=200, stdin=subprocess.DEVNULL)
    took = time.monotonic() - t0
    out = r.stdout + r.stderr
    assert r.returncode == 2, out
    assert took < 60, f"took {took:.0f} s: {out}"
    errors = [line for line in r.stderr.splitlines() if line.startswith("chaos: error:")]
    assert len(errors) == 1, out
    named = [name for name in ("replica-a", "replica-c") if f": {name} restarted" in errors[0]]
    assert len(named) == 1 and named[0] in dying, errors[0]
    assert "before the stack served" in errors[0] and ERROR in errors[0], errors[0]
    env = load(str(path))
    assert not stack_processes(str(tmp_path), env_ports(env)), "the failed start left processes behind"


@pytest.mark.parametrize("dying_env", [("replica-c",)], ids=["one-replica"], indirect=True)
def test_the_pytest_sessions_start_says_the_same(dying_env: tuple[Path, tuple[str, ...]]) -> None:
    path, _ = dying_env
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "pytest", "suites/recovery", "-k", "baseline_no_fault", "--env", str(path),
                        "-p", "no:cacheprovider", "-q"], capture_output=True, text=True, cwd=REPO, timeout=200,
                       stdin=subprocess.DEVNULL)
    took, out = time.monotonic() - t0, r.stdout + r.stderr
    assert r.returncode == 3, out[-3000:]
    assert took < 60, f"took {took:.0f} s: {out[-3000:]}"
    assert "failed to start: stack" in out and "replica-c restarted 2 times before the stack served" in out, out[-3000:]
    assert ERROR in out, out[-3000:]
