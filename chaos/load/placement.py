"""Where a distributed load's workers run, and how each is started.

- `local` (or none): beside the master, on this machine.
- a lab host (`lab-load`): a network namespace of this machine (`chaos lab up`), entered with nsenter;
  the worker shares this machine's files, and reaches the master on the root side of its link.
- `ssh://[user@]host[:port]`: any host, through the system `ssh` client (as Docker over SSH is, so the
  team's ~/.ssh/config, agent, ProxyJump and known_hosts apply; CHAOS_SSH_CONFIG names another config).
  The host needs the harness installed (`worker_python`: its interpreter there, by default the path of
  this one) and nothing else: the job goes over the session's stdin and the records come back over its
  stdout (chaos/load/ssh_worker.py). The worker reaches the master through a reverse forward of the
  same session (`ssh -R`), so the master binds only 127.0.0.1 and no load host needs a route back to
  the harness (a CI runner behind NAT, a firewall that lets only SSH in).
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from urllib.parse import urlparse

from chaos.errors import LoadError


@dataclass(frozen=True)
class Placement:
    """Where the workers of one run are started (see the module docstring)."""

    where: str = "local"
    master_host: str = "127.0.0.1"  # what the master binds
    prefix: list[str] = field(default_factory=list)  # nsenter for a lab host
    ssh_dest: str | None = None  # user@host of an ssh:// worker host
    ssh_port: int | None = None
    python: str = sys.executable

    @property
    def remote(self) -> bool:
        return self.ssh_dest is not None

    def ssh_command(self, master_port: int, forward_port: int) -> list[str]:
        """The ssh that runs one worker on the host, its master reached through `-R forward_port`."""
        return self.ssh([self.python, "-m", "chaos.load.ssh_worker", "--master-port", str(forward_port)],
                        ["-R", f"127.0.0.1:{forward_port}:127.0.0.1:{master_port}", "-o", "ExitOnForwardFailure=yes"])

    def ssh(self, remote: list[str], options: tuple[str, ...] | list[str] = (),
            connect_timeout_s: float = 10) -> list[str]:
        """`ssh` to the host running `remote`, never prompting (CHAOS_SSH_CONFIG: another ssh_config)."""
        config = os.environ.get("CHAOS_SSH_CONFIG")
        return ["ssh", *(["-F", config] if config else []), "-o", "BatchMode=yes",
                "-o", f"ConnectTimeout={max(1, int(connect_timeout_s))}", "-o", "ServerAliveInterval=5",
                "-o", "ServerAliveCountMax=3", *(["-p", str(self.ssh_port)] if self.ssh_port else []), *options,
                self.ssh_dest or "", "--", shlex.join(remote)]


def worker_placement(worker_host: str | None, python: str | None = None) -> Placement:
    """The Placement of `worker_host`: local, a lab host (lab-load) or ssh://[user@]host[:port]."""
    if worker_host in (None, "", "local"):
        return Placement()
    assert worker_host is not None
    if worker_host.startswith("ssh://"):
        u = urlparse(worker_host)
        try:
            port = u.port
        except ValueError:
            port = -1
        if not u.hostname or port == -1 or u.path not in ("", "/"):
            raise LoadError(f"worker host {worker_host!r}: expected ssh://[user@]host[:port]")
        dest = f"{u.username}@{u.hostname}" if u.username else u.hostname
        return Placement(worker_host, ssh_dest=dest, ssh_port=port, python=python or sys.executable)
    if worker_host.startswith("lab-"):
        # a lab host is a network namespace of this machine (`chaos lab up`); the load layer knows only that
        # convention, not the lab's host table: the master is reached at the namespace's route to the lab network
        netns = f"chaos-{worker_host}"
        if not Path(f"/var/run/netns/{netns}").exists():
            raise LoadError(f"worker host {worker_host}: namespace {netns} does not exist (run `chaos lab up`)")
        # nsenter execs the worker in the host's network: its traffic leaves from the host's address, and it
        # reaches the master on the root side of the host's link (the next hop of its route)
        return Placement(worker_host, _next_hop(netns, worker_host), ["nsenter", f"--net=/var/run/netns/{netns}"])
    up = sorted(p.name.removeprefix("chaos-") for p in Path("/var/run/netns").glob("chaos-lab-*"))
    names = ", ".join(up) or "lab-NAME, e.g. lab-load"
    raise LoadError(f"worker host {worker_host!r}: expected local, a lab host ({names}) or ssh://[user@]host[:port]")


def _next_hop(netns: str, worker_host: str) -> str:
    """The address a lab host routes through (the root side of its veth): `ip -n NETNS route` names it."""
    try:
        out = subprocess.run(["ip", "-n", netns, "-4", "route", "show"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise LoadError(f"worker host {worker_host}: cannot read the routes of namespace {netns}: {e}") from None
    for line in out.splitlines():
        words = line.split()
        if "via" in words[:-1]:
            return words[words.index("via") + 1]
    raise LoadError(f"worker host {worker_host}: namespace {netns} has no route to the lab network (run `chaos lab up`)")


def check_worker_host(worker_host: str, python: str | None = None, timeout_s: float = 5.0) -> tuple[bool, str]:
    """(ok, one line) for `chaos env check --probe`: an ssh:// host logs in with the key and imports the
    harness's worker there; a lab host's namespace exists."""
    try:
        where = worker_placement(worker_host, python)
    except LoadError as e:
        return False, str(e)
    if not where.remote:
        return True, "lab host" if where.prefix else "this machine"
    cmd = where.ssh([where.python, "-c", "import chaos.load.ssh_worker, locust; print(locust.__version__)"],
                    connect_timeout_s=timeout_s)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s + 10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"ssh: {type(e).__name__}: {e}".splitlines()[0]
    if r.returncode == 0:
        return True, f"ssh ok, locust {r.stdout.strip()} at {where.python}"
    said = [ln.strip() for ln in (r.stderr or r.stdout).splitlines() if ln.strip()]
    return False, said[-1] if said else f"ssh exited {r.returncode}"


def job_line(config_path: Path, prompts_file: str | None) -> bytes:
    """What an ssh worker reads first on its stdin: the config, and the prompts file's text."""
    prompts = Path(prompts_file).read_text(encoding="utf-8") if prompts_file else None
    return json.dumps({"config": json.loads(config_path.read_text(encoding="utf-8")), "prompts": prompts}).encode() + b"\n"


class RecordStream(threading.Thread):
    """Writes what an ssh worker sends back (chaos/load/ssh_worker.py) into the run's out_dir."""

    def __init__(self, src: IO[bytes], out_dir: Path) -> None:
        super().__init__(daemon=True)
        self.src, self.out_dir = src, out_dir
        self.ready = threading.Event()  # the worker's locust started

    def run(self) -> None:
        files: dict[str, IO[bytes]] = {}
        try:
            for line in self.src:
                kind, _, rest = line.partition(b" ")
                if kind == b"S":  # `S <hostname>`: the worker's locust is up
                    self.ready.set()
                    continue
                raw, _, body = rest.partition(b" ")
                name = Path(raw.decode(errors="replace")).name  # a bare file name: never a path elsewhere
                if kind == b"R" and name.startswith("records-") and name.endswith(".jsonl"):
                    f = files.get(name) or files.setdefault(name, open(self.out_dir / name, "ab"))
                    f.write(body.rstrip(b"\n") + b"\n")
                    f.flush()
                elif kind == b"M" and name.startswith("meta-") and name.endswith(".json"):
                    (self.out_dir / name).write_bytes(body.strip())
        except (OSError, ValueError):
            pass  # the session broke off: what came before it is written
        finally:
            for f in files.values():
                f.close()
