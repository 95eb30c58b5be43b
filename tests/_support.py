"""Shared helpers for the harness's own tests: skip-or-fail on missing components, free ports."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from chaos.pytest_plugin import require_component
from chaos.shared.proc import free_port  # noqa: F401 (the tests' one spelling of it)

if TYPE_CHECKING:
    from chaos.observe.timeline import Timeline

REPO = Path(__file__).resolve().parent.parent


def toxiproxy_binary() -> str | None:
    """Path of a toxiproxy-server binary: $PATH first, then <repo>/.tools/bin."""
    for name in ("toxiproxy-server",):
        found = shutil.which(name)
        if found:
            return found
    local = REPO / ".tools" / "bin" / "toxiproxy-server"
    return str(local) if local.is_file() and os.access(local, os.X_OK) else None


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after `grace_s`: a test's server never outlives it (chaos.shared.proc.terminate)."""
    from chaos.shared.proc import terminate

    terminate(proc, grace_s)


def ephemeral_port_low() -> int:
    """The first port of the kernel's ephemeral range: a fixed port above it can be taken (or held in
    TIME_WAIT) by any outgoing connection between a free-port check and the listen."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


# The fixed CHAOS_PORT_OFFSETs of the end-to-end tests that run an environment of environments/ by name
# (their state dirs, <state_dir>-port+N, are theirs too). No two of them, and none of them and any offset
# free_port_offset hands out, put two components of environments/local.yaml, chaos/env/builtin/local.yaml
# or examples/own-suite's my-stack.yaml on one port (tests/unit/test_port_offsets.py holds that): the
# gray-release game day at 760 and the release suite at 780 once did (replica-a's simulator at 18201+780
# is replica-a's fault proxy at 18221+760), harmless only while the lane ran one file at a time.
FIXED_OFFSETS = {"gameday": 730, "gray-release": 760, "release-suite": 880}
OFFSET_PORTS_BELOW = 20000  # the slices are cut for files whose ports lie below this (higher ones get fewer offsets)
OFFSET_GAP = 2000  # wider than the spread of those files' ports (18000-19474): slices this far apart never meet


def offset_candidates(worker: int = 0, workers: int = 1) -> list[int]:
    """The offsets free_port_offset may draw for xdist worker `worker` of `workers`: one slice each of the
    multiples of 100 from 1000 to where OFFSET_PORTS_BELOW would reach the ephemeral range, the slices
    OFFSET_GAP apart, so that two workers picking at the same moment can never pick clashing offsets."""
    low, top = 1000, ephemeral_port_low() - OFFSET_PORTS_BELOW
    band = (top - low) // max(workers, 1)
    start, stop = low + worker * band, low + (worker + 1) * band - OFFSET_GAP
    return [o for o in range(low, top, 100) if start <= o < stop]


def _xdist_worker() -> tuple[int, int]:
    """(this xdist worker's index, the number of workers); (0, 1) outside xdist."""
    name, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if name.startswith("gw") and name[2:].isdigit() and count.isdigit() and int(name[2:]) < int(count):
        return int(name[2:]), int(count)
    return 0, 1


def env_ports(*texts: str) -> set[int]:
    """Every loopback port an environment file's text names."""
    import re

    ports = {int(p) for t in texts for p in re.findall(r"127\.0\.0\.1:(\d+)", t)}
    ports |= {int(p) for t in texts for p in re.findall(r"\bport: (\d+)", t)}
    ports |= {int(p) for t in texts for m in re.findall(r"rank_ports: \[([\d, ]+)\]", t) for p in m.split(",")}
    return ports


def free_port_offset(*texts: str) -> int:
    """A CHAOS_PORT_OFFSET at which every loopback port of these environment texts is free now and stays
    below the ephemeral range (beside any stack a developer keeps running on the files' own ports).

    Below the ephemeral range: a sim rank once failed to listen on 127.0.0.1:34602, an outgoing
    connection's port taken between the check and the listen. Drawn at random from this xdist worker's
    own slice (offset_candidates): tests of one worker run one after another, and the other worker's
    tests draw from a slice no port of theirs can reach."""
    import random

    import pytest

    ports = env_ports(*texts)
    fits = [o for o in offset_candidates(*_xdist_worker()) if max(ports, default=0) + o < ephemeral_port_low()]
    for offset in random.sample(fits, min(40, len(fits))):
        if all(_port_free(p + offset) for p in ports):
            return offset
    pytest.fail(f"no port offset left all {len(ports)} ports free below the ephemeral range")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def rules_without(rules: Path, alert: str, dest: Path) -> Path:
    """A copy of the rule file `rules` in folder `dest` with alert `alert` removed (a blind spot to plant)."""
    import yaml

    doc = yaml.safe_load(rules.read_text())
    for g in doc["groups"]:
        g["rules"] = [r for r in g["rules"] if r.get("alert") != alert]
    out = dest / f"without-{alert}.rules.yml"
    out.write_text(yaml.safe_dump(doc))
    return out


def _docker_reason() -> str | None:
    try:
        import docker

        client = docker.from_env(timeout=10)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as e:  # any failure means "no usable engine"
        return f"docker engine not reachable: {type(e).__name__}: {e}"
    return None


def _image_reason(image: str) -> str | None:
    reason = _docker_reason()
    if reason:
        return reason
    import docker

    client = docker.from_env(timeout=10)
    try:
        client.images.get(image)
    except Exception:
        return f"docker image {image} not built (run scripts/build-image.sh)"
    finally:
        client.close()
    return None


_CHECKS = {
    "docker": _docker_reason,
    "toxiproxy": lambda: None if toxiproxy_binary() else "toxiproxy-server not in $PATH nor .tools/bin",
}


def require(component: str) -> None:
    """Return if `component` is usable; else skip, or fail when CHAOS_REQUIRE names it.

    Components: "docker", "toxiproxy", or "image:<name>" (a built docker image; CHAOS_REQUIRE
    matches it as "image" or the full "image:<name>").
    """
    if component.startswith("image:"):
        reason = _image_reason(component.split(":", 1)[1])
        keys = {component, "image", "docker"}
    elif component in _CHECKS:
        reason = _CHECKS[component]()
        keys = {component}
    else:
        raise ValueError(f"require(): unknown component {component!r}; known: {sorted(_CHECKS)} or image:<name>")
    require_component(component, reason, also=tuple(keys))


@contextmanager
def hand_started_sim(log_dir: Path, *flags: str) -> Iterator[str]:
    """A simulator started as a user would start any server (no request log, no admin token); yields its URL."""
    import subprocess
    import sys

    from chaos.targets.base import http_health, wait_until

    port = free_port()
    with open(log_dir / "sim.log", "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "chaos.stack.sim", "--port", str(port), "--profile", "instant",
                                 "--served-model-name", "sim-model", *flags], stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: http_health("127.0.0.1", port), 30.0, what="sim /health", target="hand-started sim")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def replayed(trace: Path, interval_s: float = 0.01) -> Timeline:
    """A recorded GPU trace played through the GPU observer into a new timeline (bounded: 20 s)."""
    import time

    from chaos.observe.gpu import GpuObserver, ReplaySource
    from chaos.observe.timeline import Timeline as _Timeline

    tl = _Timeline()
    obs = GpuObserver(tl, source=ReplaySource(trace), interval_s=interval_s)
    obs.start()
    end = time.monotonic() + 20
    while obs.running and time.monotonic() < end:
        time.sleep(0.01)
    obs.stop()
    return tl


class FakeClock:
    """A clock and its sleep for code whose time is a parameter: sleeping moves the clock on at once."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def sleep(self, dt: float) -> None:
        self.now += dt


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Files (relative path -> text) written under root, their folders made: a made-up tree for a check to read."""
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


def strong_groups(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one node (Tarjan): each a circle of imports, or several."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


CPU_CAP_PERCENT = 2  # a starved client: a CPU cgroup capped at 2 % of one core


def _cpu_cgroup_parent() -> tuple[Path, str] | None:
    """(where a child cgroup goes, "v1" or "v2") if this host lets us cap a cgroup's CPU."""
    v2 = Path("/sys/fs/cgroup")
    if (v2 / "cgroup.controllers").exists() and "cpu" in (v2 / "cgroup.subtree_control").read_text().split():
        return v2, "v2"
    v1 = Path("/sys/fs/cgroup/cpu")
    if (v1 / "cpu.cfs_quota_us").exists():
        return v1, "v1"
    return None


@contextmanager
def cpu_capped_cgroup(percent: int = CPU_CAP_PERCENT) -> Iterator[Path]:
    """The cgroup.procs file of a fresh CPU cgroup capped at `percent` % of one core (skip without root or a
    CPU controller); removed on exit once the processes put in it are gone."""
    import time
    import uuid

    import pytest

    found = _cpu_cgroup_parent()
    if found is None or os.geteuid() != 0:
        pytest.skip("needs root and a CPU cgroup controller (cgroup v1 cpu or v2 cpu.max) to starve a client")
    parent, kind = found
    d = parent / f"llm-chaos-starve-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    try:
        if kind == "v2":
            (d / "cpu.max").write_text(f"{percent * 1000} 100000")
        else:
            (d / "cpu.cfs_period_us").write_text("100000")
            (d / "cpu.cfs_quota_us").write_text(str(percent * 1000))
        yield d / "cgroup.procs"
    finally:
        for _ in range(50):  # its processes were killed; the cgroup empties as they are reaped
            try:
                d.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def in_cgroup(procs: Path, cmd: str) -> str:
    """A shell command line that joins the cgroup whose cgroup.procs is `procs`, then becomes `cmd`."""
    import shlex

    return f"echo $$ > {shlex.quote(str(procs))} && exec {cmd}"
