"""Issue 7 item 9: a run killed in the middle of a fault leaves nothing `chaos cleanup` does not put right.

A real harness process starts the embedded stack on free ports, freezes a TP rank (SIGSTOP) and puts a
latency toxic on the client proxy through the real fault objects (so the ledger records them), then is
signalled. SIGKILL: nothing can revert in-process, so `chaos cleanup --env FILE` must. SIGTERM/SIGINT:
the harness must revert and stop everything by itself before it exits.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chaos.env import load
from chaos.faults.ledger import Ledger
from chaos.shared.toxiproxy import Toxiproxy
from tests._support import require
from tests.standins.stack.stack_env import (
    REPO,
    cleanup_cli,
    env_ports,
    kill_stack_processes,
    proc_state,
    stack_processes,
    start_harness,
    write_env,
)


def _wait_gone(marker: str, ports: set[int], timeout: float = 8.0) -> dict[int, str]:
    deadline = time.monotonic() + timeout
    left = stack_processes(marker, ports)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = stack_processes(marker, ports)
    return left


@pytest.fixture
def run(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """An env file on free ports; afterwards, whatever a failing test left is reaped (force cleanup + kill)."""
    require("toxiproxy")
    env_file = write_env(tmp_path)
    env = load(str(env_file))
    ctx: dict[str, Any] = {"file": env_file, "env": env, "marker": str(tmp_path), "ports": env_ports(env)}
    try:
        yield ctx
    finally:
        proc = ctx.get("proc")
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        from chaos.faults.ledger import cleanup

        cleanup(env, force=True)
        kill_stack_processes(ctx["marker"], ctx["ports"])


def test_sigkill_mid_fault_is_put_right_by_chaos_cleanup(run: dict[str, Any], tmp_path: Path) -> None:
    env = run["env"]
    proc, info = start_harness(run["file"], tmp_path)
    run["proc"] = proc
    toxi = Toxiproxy(env.toxiproxy.api)
    assert proc_state(info["frozen_pid"]) == "T"
    assert {t["name"] for t in toxi.toxics("client")} >= set(info["toxics"])

    proc.send_signal(signal.SIGKILL)  # the harness process only; its stack lives on, orphaned
    assert proc.wait(10) == -signal.SIGKILL

    # the damage really is left behind: the toxic still listed, the stack orphaned. The rank is not left
    # stopped: the stack shares the harness's session, so its death orphaned the rank's process group,
    # and the kernel sent that group SIGHUP (ignored by targets) and SIGCONT (POSIX job control)
    assert proc_state(info["frozen_pid"]) in ("R", "S"), f"frozen rank is {proc_state(info['frozen_pid'])}"
    assert {t["name"] for t in toxi.toxics("client")} >= set(info["toxics"])
    orphans = stack_processes(run["marker"], run["ports"])
    assert set(info["pids"].values()) <= set(orphans), f"pidfile pids {info['pids']} vs live {orphans}"
    assert len(Ledger(env.state_dir).outstanding()) == 2

    out = cleanup_cli(run["file"]).stdout
    assert "removed toxic" in out and "SIGCONT" in out, out
    left = _wait_gone(run["marker"], run["ports"])
    assert not left, f"stack processes survived chaos cleanup: {left}"
    for pid in [info["frozen_pid"], *info["pids"].values()]:
        assert proc_state(pid) in (None, "Z"), f"pid {pid} is {proc_state(pid)} after cleanup"
    assert not toxi.ping() or not any(p.get("toxics") for p in toxi.proxies().values())
    assert Ledger(env.state_dir).outstanding() == []
    assert not list((Path(env.state_dir) / "targets").glob("*.pid"))

    again = cleanup_cli(run["file"]).stdout
    assert again.strip().splitlines() == ["chaos: cleanup: 0 action(s)"], again


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_sigterm_and_sigint_revert_before_exit(run: dict[str, Any], tmp_path: Path, sig: signal.Signals) -> None:
    env = run["env"]
    proc, info = start_harness(run["file"], tmp_path)
    run["proc"] = proc
    assert proc_state(info["frozen_pid"]) == "T"

    proc.send_signal(sig)
    rc = proc.wait(40)
    expected = {signal.SIGTERM: {128 + signal.SIGTERM}, signal.SIGINT: {128 + signal.SIGINT, -signal.SIGINT}}[sig]
    assert rc in expected, f"harness exit {rc} after {sig.name}; stderr: {(tmp_path / 'harness.err').read_text()[-1500:]}"

    ledger = Ledger(env.state_dir)
    assert ledger.outstanding() == []
    done_by = {r["id"]: r.get("by") for r in ledger.records() if r.get("op") == "done"}
    assert sorted(done_by.values()) == ["signal", "signal"], done_by
    left = _wait_gone(run["marker"], run["ports"], timeout=3.0)
    assert not left, f"stack processes survived {sig.name}: {left}"
    assert proc_state(info["frozen_pid"]) in (None, "Z")
    assert not list((Path(env.state_dir) / "targets").glob("*.pid"))

    out = cleanup_cli(run["file"]).stdout
    assert out.strip().splitlines() == ["chaos: cleanup: 0 action(s)"], out


@pytest.mark.slow
def test_sigkilled_game_day_cli_is_put_right_by_chaos_cleanup(run: dict[str, Any], tmp_path: Path) -> None:
    """`chaos env up -d` + `chaos fault inject latency`, both SIGKILLed: `chaos cleanup` reverts and reaps."""
    env, f = run["env"], str(run["file"])
    up = subprocess.run([sys.executable, "-m", "chaos.cli", "env", "up", "--env", f, "--detach"],
                        capture_output=True, text=True, cwd=REPO, timeout=90, stdin=subprocess.DEVNULL)
    assert up.returncode == 0, up.stdout + up.stderr
    owner = int(json.loads((Path(env.state_dir) / "stack.json").read_text())["owner"])
    inject = subprocess.Popen([sys.executable, "-m", "chaos.cli", "fault", "inject", "latency", "--env", f,
                               "--proxy", "client", "--param", "latency=1500", "--duration", "120"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
                              stdin=subprocess.DEVNULL)
    run["proc"] = inject
    described = json.loads(inject.stdout.readline() if inject.stdout else "{}")
    toxics = set(described["params"]["toxics"])
    toxi = Toxiproxy(env.toxiproxy.api)
    assert {t["name"] for t in toxi.toxics("client")} == toxics

    inject.send_signal(signal.SIGKILL)
    os.kill(owner, signal.SIGKILL)
    assert inject.wait(10) == -signal.SIGKILL
    assert {t["name"] for t in toxi.toxics("client")} == toxics  # left behind, with the whole stack
    assert stack_processes(run["marker"], run["ports"])

    out = cleanup_cli(run["file"]).stdout
    assert "removed toxic" in out, out
    left = _wait_gone(run["marker"], run["ports"])
    assert not left, f"stack processes survived chaos cleanup: {left}"
    assert proc_state(owner) in (None, "Z")
    assert Ledger(env.state_dir).outstanding() == []
    again = cleanup_cli(run["file"]).stdout
    assert again.strip().splitlines() == ["chaos: cleanup: 0 action(s)"], again
