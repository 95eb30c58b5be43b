"""Issue 28 item 4: one state for every command. A run started in the project root and `chaos stop`,
`chaos fault inject|ledger` and `chaos cleanup` run from another directory with CHAOS_ENV=<absolute
path> meet in the same state directory: the stop file the run polls, the ledger it wrote."""
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
from chaos.experiment.stop import StopSwitch, stop_file
from chaos.faults.ledger import Ledger
from chaos.shared import proc as _proc
from chaos.targets.process import ProcessTarget
from tests._support import free_port
from tests.integration.targets.conftest import TINY

HARNESS = str(Path(__file__).with_name("freeze_harness.py"))


@pytest.fixture
def project(tmp_path: Path) -> dict[str, Any]:
    """project/envs/mine.yaml with a relative state_dir, and another directory to run commands from."""
    root, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (root / "envs").mkdir(parents=True)
    elsewhere.mkdir()
    return {"root": root, "elsewhere": elsewhere, "file": root / "envs" / "mine.yaml"}


def _write(project: dict[str, Any], extra: str = "") -> Any:
    project["file"].write_text(f"name: mine\nstate_dir: ../run-state\nendpoints: {{api: 'http://127.0.0.1:9'}}\n{extra}")
    return load(str(project["file"]))


def _chaos(project: dict[str, Any], *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    """A `chaos` command run from the other directory, the environment given only by CHAOS_ENV."""
    env = {**os.environ, "CHAOS_ENV": str(project["file"])}
    env.pop("CHAOS_ENV_DIR", None)
    r = subprocess.run([sys.executable, "-m", "chaos.cli", *args], capture_output=True, text=True, timeout=60,
                       cwd=project["elsewhere"], env=env, **kw)
    assert r.returncode == 0, f"chaos {' '.join(args)}: rc {r.returncode}: {r.stdout}{r.stderr}"
    return r


def test_chaos_stop_from_another_directory_reaches_the_run_s_stop_file(project, monkeypatch) -> None:
    _write(project)
    monkeypatch.chdir(project["root"])  # the run, started in the project root, names its file relatively
    run_env = load("envs/mine.yaml")
    switch = StopSwitch(stop_file(run_env.state_dir), since=time.time())
    assert switch.asked() is None
    out = _chaos(project, "stop", "--reason", "pager").stdout
    assert str(project["root"] / "run-state" / "STOP") in out, out
    by, why = switch.asked() or ("", "")
    assert by.startswith("chaos stop (") and why == "pager"
    assert not (project["elsewhere"] / "run-state").exists() and not list(project["elsewhere"].iterdir())


def test_inject_ledger_and_cleanup_from_another_directory_meet_in_one_ledger(project, toxiproxy_server, proxy) -> None:
    name, listen = proxy
    env = _write(project, f"toxiproxy: {{api: '{toxiproxy_server.api}', proxies: [{{name: {name}, listen: '{listen}', "
                          f"upstream: '127.0.0.1:9'}}]}}\n")
    client = toxiproxy_server.client()
    inject = subprocess.Popen([sys.executable, "-m", "chaos.cli", "fault", "inject", "latency", "--proxy", name,
                               "--param", "latency=800", "--duration", "120"], cwd=project["elsewhere"],
                              env={**os.environ, "CHAOS_ENV": str(project["file"])}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    try:
        line = inject.stdout.readline() if inject.stdout else ""
        toxics = set(json.loads(line)["params"]["toxics"])
        assert {t["name"] for t in client.toxics(name)} == toxics
        outstanding = Ledger(env.state_dir).outstanding()  # the run's ledger, where the project keeps it
        assert [r["fault"]["kind"] for r in outstanding] == ["latency"], outstanding
        listed = [json.loads(x) for x in _chaos(project, "fault", "ledger").stdout.splitlines()]
        assert [r["id"] for r in listed] == [outstanding[0]["id"]], listed

        inject.send_signal(signal.SIGKILL)
        assert inject.wait(10) == -signal.SIGKILL
        assert {t["name"] for t in client.toxics(name)} == toxics  # left behind: nothing reverted in-process
        out = _chaos(project, "cleanup").stdout
        assert "removed toxic" in out, out
        assert client.toxics(name) == [] and Ledger(env.state_dir).outstanding() == []
        assert _chaos(project, "fault", "ledger").stdout == ""
    finally:
        if inject.poll() is None:
            inject.kill()
            inject.wait(10)
        for t in client.toxics(name):
            client.remove_toxic(name, t["name"])


@pytest.fixture
def replica(project) -> Iterator[tuple[ProcessTarget, list[int]]]:
    """A two-rank replica started by this test (so its group outlives the harness), its pidfile in the run's state."""
    env = _write(project)
    port = free_port()
    t = ProcessTarget("tiny", [sys.executable, TINY, str(port), "--ranks", "2"], port=port, state_dir=env.state_dir)
    t.start()
    try:
        t.wait_healthy(10)
        deadline = time.monotonic() + 10
        while len(t.rank_pids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        yield t, t.rank_pids()
    finally:
        for pid in t.rank_pids():
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        t.stop(3)
        t.remove()


def test_cleanup_from_another_directory_thaws_a_sigkilled_run_s_frozen_rank(project, replica) -> None:
    t, ranks = replica
    assert len(ranks) == 2, ranks
    rank = ranks[1]
    h = subprocess.Popen([sys.executable, HARNESS, str(rank)], cwd=project["root"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                         env={**os.environ, "CHAOS_ENV": "envs/mine.yaml"})
    try:
        assert (h.stdout.readline() if h.stdout else "").strip() == "READY", h.stderr.read() if h.stderr else ""
        assert _proc.state(rank) == "T"
        h.send_signal(signal.SIGKILL)
        assert h.wait(10) == -signal.SIGKILL
        time.sleep(0.3)
        assert _proc.state(rank) == "T", "the frozen rank stays frozen once its harness is gone"
        listed = [json.loads(x) for x in _chaos(project, "fault", "ledger").stdout.splitlines()]
        assert [(r["fault"]["kind"], r["fault"]["params"]["pid"]) for r in listed] == [("rank-freeze", rank)], listed

        out = _chaos(project, "cleanup").stdout
        assert "SIGCONT" in out, out
        assert _proc.state(rank) in ("R", "S"), f"rank {rank} is {_proc.state(rank)} after chaos cleanup"
        assert t.pid() is not None and t.rank_pids() == ranks  # thawed, not reaped: its owner still runs
        assert _chaos(project, "fault", "ledger").stdout == ""
    finally:
        if h.poll() is None:
            h.kill()
            h.wait(10)
