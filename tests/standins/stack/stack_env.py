"""Temporary embedded-stack environments on free ports, and /proc checks for what a run left behind."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
HARNESS = Path(__file__).resolve().parent / "stack_harness.py"
LEAD_RANGE = range(18000, 18501)  # the lead's own embedded stack lives here: never hand these out
STACK_MARKERS = ("toxiproxy-server", "chaos.stack.sim", "chaos.stack.gateway", "chaos.cli gateway", "chaos-sim-rank")


def free_ports(n: int) -> list[int]:
    """n distinct TCP ports on 127.0.0.1 that were free a moment ago (all bound at once, so no repeats)."""
    socks: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < n:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            port = int(s.getsockname()[1])
            if port not in LEAD_RANGE:
                ports.append(port)
    finally:
        for s in socks:
            s.close()
    return ports


def _layout(kind: str, ports: list[int], suffix: str) -> dict[str, Any]:
    """The toxiproxy/gateway/targets sections: replica-a (stable) and replica-c (canary), TP 2 each."""
    api, client, gw, a, c, pa, pc, ra, rc, pra, prc, fa, fc = ports
    loc = lambda p: f"127.0.0.1:{p}"  # noqa: E731
    proxies = [{"name": "client", "listen": loc(client), "upstream": loc(gw)},
               {"name": "replica-a", "listen": loc(pa), "upstream": loc(fa)},
               {"name": "replica-c", "listen": loc(pc), "upstream": loc(fc)},
               {"name": "replica-a-rank1", "listen": loc(pra), "upstream": loc(ra)},
               {"name": "replica-c-rank1", "listen": loc(prc), "upstream": loc(rc)}]
    targets = []
    for name, port, rank, pool in (("replica-a", a, ra, "stable"), ("replica-c", c, rc, "canary")):
        t: dict[str, Any] = {"name": name, "kind": kind, "port": port, "pool": pool, "tp_size": 2,
                             "rank_ports": [rank], "serve_proxy": name, "rank_proxies": [f"{name}-rank1"],
                             "fault_proxy": name,
                             "restart_policy": "always",
                             "simulator": {"profile": "instant", "collective_timeout_s": 3}}
        if kind == "docker":
            t["image"] = "llm-chaos-sim:latest"
            t["container_name"] = f"chaos-test-{suffix}-{name}"
        targets.append(t)
    return {"endpoints": {"api": f"http://{loc(client)}", "gateway_admin": f"http://{loc(gw)}", "model": "sim-model"},
            "gateway": {"listen": loc(gw), "admin_token": "test-admin"},
            "toxiproxy": {"api": f"http://{loc(api)}", "proxies": proxies},
            "fault_proxies": [{"name": "replica-a", "listen": loc(fa), "upstream": f"http://{loc(a)}"},
                              {"name": "replica-c", "listen": loc(fc), "upstream": f"http://{loc(c)}"}],
            "targets": targets}


def write_env(tmp_path: Path, *, docker: bool = False) -> Path:
    """Write a copy of environments/local(-docker).yaml with free ports and a state dir under tmp_path."""
    base = yaml.safe_load((REPO / "environments" / ("local-docker.yaml" if docker else "local.yaml")).read_text())
    suffix = uuid.uuid4().hex[:8]
    layout = _layout("docker" if docker else "process", free_ports(13), suffix)
    layout["gateway"] = {**(base.get("gateway") or {}), **layout["gateway"]}  # its settings (progress ejection) too
    base.update(layout)
    base["name"] = f"stacktest-{suffix}"
    base["embedded"] = "docker" if docker else "process"
    base["state_dir"] = str(tmp_path / "state")
    base.pop("baseline_file", None)
    mon = base.get("monitoring") or {}
    if mon.get("rule_files"):  # relative to the environment file: the copy lives elsewhere
        mon["rule_files"] = [str((REPO / "environments" / f).resolve()) for f in mon["rule_files"]]
    path = tmp_path / f"{base['name']}.yaml"
    path.write_text(yaml.safe_dump(base, sort_keys=False))
    return path


def env_ports(env: Any) -> set[int]:
    """Every port an environment's stack listens on."""
    ports = {int(p.listen.rsplit(":", 1)[1]) for p in env.toxiproxy.proxies}
    ports.add(int(env.toxiproxy.api.rsplit(":", 1)[1]))
    ports.add(int(env.gateway.listen.rsplit(":", 1)[1]))
    ports.update(int(p.listen.rsplit(":", 1)[1]) for p in env.fault_proxies)
    for t in env.targets:
        ports.add(t.port)
        ports.update(t.rank_ports)
    return ports


# ---- /proc: what is still alive --------------------------------------------------------------------
def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def proc_state(pid: int) -> str | None:
    raw = _read(f"/proc/{pid}/stat")
    return raw[raw.rindex(")") + 2:].split()[0] if ")" in raw else None


def listening_inodes(ports: set[int]) -> set[str]:
    """Socket inodes of TCP listeners on any of `ports` (from /proc/net/tcp and tcp6)."""
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in _read(table).splitlines()[1:]:
            f = line.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) in ports:
                out.add(f[9])
    return out


def kill_stack_processes(marker: str, ports: set[int]) -> None:
    """SIGKILL what stack_processes finds (SIGCONT first: a frozen one dies too); gone already is fine."""
    for pid in stack_processes(marker, ports):
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass


def stack_processes(marker: str, ports: set[int]) -> dict[int, str]:
    """Live processes of one stack run: a stack program whose cmdline names `marker` (the state dir or
    env file) or one of `ports`, or any process holding a listener on one of `ports`. {pid: cmdline}"""
    inodes = listening_inodes(ports)
    found: dict[int, str] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        pid = int(name)
        state = proc_state(pid)
        if state is None or state in ("Z", "X"):
            continue
        cmd = _read(f"/proc/{pid}/cmdline").strip()
        ours = any(m in cmd for m in STACK_MARKERS) and (marker in cmd or any(str(p) in cmd.split() or f":{p}" in cmd
                                                                              for p in ports))
        if not ours and inodes:
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                fds = []
            ours = any(_socket_inode(pid, fd) in inodes for fd in fds)
        if ours:
            found[pid] = cmd
    return found


def _socket_inode(pid: int, fd: str) -> str:
    try:
        link = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return ""
    return link[len("socket:["):-1] if link.startswith("socket:[") else ""


def pidfile_pids(state_dir: Path) -> dict[str, int]:
    """{target: pid} from the pidfiles under <state_dir>/targets."""
    out = {}
    for pf in sorted((state_dir / "targets").glob("*.pid")):
        try:
            info = json.loads(pf.read_text())
            out[str(info.get("target", pf.stem))] = int(info["pid"])
        except (OSError, ValueError, KeyError):
            continue
    return out


# ---- the harness subprocess and the cleanup CLI --------------------------------------------------
def start_harness(env_file: Path, tmp_path: Path) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """Run stack_harness.py on env_file until it prints READY; returns (process, its READY info)."""
    err = open(tmp_path / "harness.err", "w")
    proc = subprocess.Popen([sys.executable, str(HARNESS), str(env_file)], stdout=subprocess.PIPE, stderr=err,
                            stdin=subprocess.DEVNULL, text=True, cwd=REPO)
    err.close()
    line = proc.stdout.readline() if proc.stdout else ""  # the harness prints READY or exits
    if not line.startswith("READY "):
        proc.kill()
        proc.wait(10)
        pytest.fail(f"harness did not get ready (rc {proc.returncode}): {line!r}; stderr tail: "
                    f"{(tmp_path / 'harness.err').read_text()[-2000:]}")
    return proc, json.loads(line[len("READY "):])


def cleanup_cli(env_file: Path) -> subprocess.CompletedProcess[str]:
    """`chaos cleanup --env FILE` as a subprocess; asserts exit 0."""
    r = subprocess.run([sys.executable, "-m", "chaos.cli", "cleanup", "--env", str(env_file)],
                       capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 0, f"chaos cleanup failed (rc {r.returncode}): {r.stdout}{r.stderr}"
    return r
