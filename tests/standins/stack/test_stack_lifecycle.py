"""The embedded stack on free ports: up -> a real completion through the client proxy -> down, nothing left.

In-process through EmbeddedStack, and as a game day runs it: `chaos env up --detach / status / down`.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chaos.bridge import EmbeddedStack
from chaos.env import load
from chaos.errors import StackError
from chaos.observe.completion import completion_ok
from tests._support import require
from tests.standins.stack.stack_env import REPO, env_ports, listening_inodes, pidfile_pids, proc_state, stack_processes, write_env


def _complete(api: str, model: str) -> dict[str, Any]:
    body = json.dumps({"model": model, "prompt": "hello chaos", "max_tokens": 4}).encode()
    req = urllib.request.Request(f"{api}/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200
        return json.loads(r.read())


def _chaos(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture
def envfile(tmp_path: Path) -> Iterator[Path]:
    """An env file on free ports; afterwards anything a failing test left is reaped."""
    require("toxiproxy")
    path = write_env(tmp_path)
    env = load(str(path))
    try:
        yield path
    finally:
        from chaos.faults.ledger import cleanup

        owner = _owner(Path(env.state_dir))
        if owner:
            _kill(owner, signal.SIGTERM)
        cleanup(env, force=True)
        for pid in stack_processes(str(tmp_path), env_ports(env)):
            _kill(pid, signal.SIGKILL)


def _owner(state_dir: Path) -> int:
    try:
        return int(json.loads((state_dir / "stack.json").read_text()).get("owner", 0))
    except (OSError, ValueError):
        return 0


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def test_up_serves_a_real_completion_and_down_leaves_nothing(envfile: Path) -> None:
    env = load(str(envfile))
    ports, marker = env_ports(env), str(envfile.parent)
    stack = EmbeddedStack(env)
    try:
        stack.up(60)
        answer = _complete(env.endpoints.api, env.endpoints.model)
        assert answer["choices"][0]["text"], answer
        assert answer["model"] == env.endpoints.model
        pids = pidfile_pids(Path(env.state_dir))
        assert set(pids) == {"toxiproxy", "replica-a", "replica-c", "gateway", "faultproxy-replica-a",
                             "faultproxy-replica-c"}
        assert all(proc_state(p) not in (None, "Z", "T") for p in pids.values()), pids
        live = stack_processes(marker, ports)
        assert set(pids.values()) <= set(live)
        ranks = [p for p, cmd in live.items() if "chaos-sim-rank" in cmd]
        assert len(ranks) == 2, live  # TP 2: one rank worker per replica
        assert json.loads((Path(env.state_dir) / "stack.json").read_text())["run_id"] == stack.run_id
        from chaos.env_check import probe

        checked = probe(env, timeout=5.0)  # `env check --probe`: every part is what the file says
        assert {p.what for p in checked} >= {"api endpoint", "gateway admin", "toxiproxy", "fault proxy replica-a",
                                             "replica replica-c"} and all(p.ok for p in checked), checked
    finally:
        stack.down()
    assert stack_processes(marker, ports) == {}
    assert listening_inodes(ports) == set()
    assert pidfile_pids(Path(env.state_dir)) == {}
    assert not (Path(env.state_dir) / "stack.json").exists()
    assert not completion_ok(env.endpoints.api, env.endpoints.model, timeout=2)


def test_up_refuses_a_busy_toxiproxy_port_and_starts_nothing(envfile: Path) -> None:
    env = load(str(envfile))
    first = EmbeddedStack(env)
    first.up(60)
    try:
        before = pidfile_pids(Path(env.state_dir))
        status = (Path(env.state_dir) / "stack.json").read_text()
        second = EmbeddedStack(env)
        with pytest.raises(StackError, match="already answers"):
            second.up(10)
        # the first one is untouched, and so is what `chaos cleanup` needs to reap it after a crash
        assert completion_ok(env.endpoints.api, env.endpoints.model)
        assert pidfile_pids(Path(env.state_dir)) == before
        assert (Path(env.state_dir) / "stack.json").read_text() == status
    finally:
        first.down()
    assert stack_processes(str(envfile.parent), env_ports(env)) == {}


def _table(out: str) -> dict[str, str]:
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in re.split(r"[│|┃]", line) if c.strip()]
        if len(cells) == 2 and cells[1] in ("yes", "no"):
            rows[cells[0]] = cells[1]
    return rows


@pytest.mark.slow
def test_cli_up_detach_status_down(envfile: Path) -> None:
    env = load(str(envfile))
    ports, marker = env_ports(env), str(envfile.parent)

    up = _chaos("env", "up", "--env", str(envfile), "--detach", "--timeout", "60")
    assert up.returncode == 0, up.stdout + up.stderr
    m = re.search(r"in the background \(pid (\d+)\)", up.stdout)
    assert m, up.stdout
    owner = int(m.group(1))
    assert proc_state(owner) not in (None, "Z")
    assert completion_ok(env.endpoints.api, env.endpoints.model)

    st = _chaos("env", "status", "--env", str(envfile))
    assert st.returncode == 0, st.stdout + st.stderr
    rows = _table(st.stdout)
    assert rows == {"toxiproxy": "yes", "replica-a": "yes", "replica-c": "yes", "gateway": "yes", "completion": "yes",
                    "fault proxy replica-a": "yes", "fault proxy replica-c": "yes"}, \
        st.stdout

    down = _chaos("env", "down", "--env", str(envfile))
    assert down.returncode == 0, down.stdout + down.stderr
    assert f"stack {env.name} down" in down.stdout
    assert proc_state(owner) in (None, "Z")
    assert stack_processes(marker, ports) == {}
    assert listening_inodes(ports) == set()
    assert pidfile_pids(Path(env.state_dir)) == {}

    after = _chaos("env", "status", "--env", str(envfile))
    assert after.returncode == 1, after.stdout + after.stderr
    assert _table(after.stdout)["completion"] == "no"

    again = _chaos("env", "down", "--env", str(envfile))  # down twice: a no-op, not an error
    assert again.returncode == 0, again.stdout + again.stderr


def test_cli_up_with_a_missing_env_file_is_one_error_line(tmp_path: Path) -> None:
    r = _chaos("env", "up", "--env", str(tmp_path / "nope.yaml"), "--detach", timeout=30)
    assert r.returncode == 2
    lines = (r.stdout + r.stderr).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("chaos: error:") and "nope.yaml" in lines[0], lines


def test_down_never_signals_a_recycled_owner_pid(envfile: Path) -> None:
    """A stale stack.json (its `env up` was SIGKILLed) may name a pid now used by someone else."""
    env = load(str(envfile))
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        Path(env.state_dir).mkdir(parents=True, exist_ok=True)
        (Path(env.state_dir) / "stack.json").write_text(json.dumps({"owner": bystander.pid, "owner_start": 1}))
        r = _chaos("env", "down", "--env", str(envfile), timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        assert bystander.poll() is None, "chaos env down signalled a process that is not the stack's owner"
        assert not (Path(env.state_dir) / "stack.json").exists()
    finally:
        bystander.kill()
        bystander.wait(10)
