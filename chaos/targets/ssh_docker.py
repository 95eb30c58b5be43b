"""A remote Docker engine over SSH, through the system `ssh` client.

`DOCKER_HOST=ssh://user@host` in the docker SDK needs paramiko even in its `use_ssh_client` mode
(its ssh adapter module imports it), and that mode spawns one `ssh ... docker system dial-stdio`
per HTTP connection. Here one `ssh -N -L LOCAL.sock:REMOTE.sock` per engine forwards the remote
engine's unix socket for the whole run, and the SDK talks to the local end like any local engine.
Chosen over paramiko because it is the client the team already uses: their ~/.ssh/config, agent,
ProxyJump, certificates and known_hosts all apply, as they do for the docker CLI. BatchMode keeps
it from ever prompting: a broken key is one line ("Permission denied (publickey)"), not a hang.

`ssh://user@host[:port][/path/of/docker.sock]`: the socket path defaults to /var/run/docker.sock.
"""
from __future__ import annotations

import atexit
import hashlib
import os
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

from chaos.errors import TargetError

_tunnels: dict[str, SshTunnel] = {}
_lock = threading.Lock()


def parse(url: str) -> tuple[str, int | None, str]:
    """(user@host, port, remote socket path) of an ssh:// Docker URL."""
    u = urlparse(url)
    if u.scheme != "ssh" or not u.hostname:
        raise TargetError(f"docker_host {url!r}: expected ssh://[user@]host[:port][/socket/path]")
    dest = f"{u.username}@{u.hostname}" if u.username else u.hostname
    return dest, u.port, (u.path if u.path not in ("", "/") else "/var/run/docker.sock")


class SshTunnel:
    """One `ssh -N -L` forward of a remote engine's socket to a local one."""

    def __init__(self, url: str, *, connect_timeout_s: float = 15.0) -> None:
        self.url = url
        self.dest, self.port, self.remote_socket = parse(url)
        key = hashlib.sha1(url.encode()).hexdigest()[:12]
        self.local_socket = Path(tempfile.gettempdir()) / f"llm-chaos-docker-{os.getpid()}-{key}.sock"
        self.connect_timeout_s = connect_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        # CHAOS_SSH_CONFIG: an ssh_config of its own instead of ~/.ssh/config (the lab's, with its key)
        config = os.environ.get("CHAOS_SSH_CONFIG")
        return ["ssh", *(["-F", config] if config else []), "-N", "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes",
                "-o", f"ConnectTimeout={max(1, int(self.connect_timeout_s))}", "-o", "ServerAliveInterval=10",
                "-o", "ServerAliveCountMax=3", "-o", "StreamLocalBindUnlink=yes",
                *(["-p", str(self.port)] if self.port else []),
                "-L", f"{self.local_socket}:{self.remote_socket}", self.dest]

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def open(self) -> str:
        """Start the forward and wait until the local socket accepts; the unix:// URL to give the SDK."""
        if self.alive():
            return f"unix://{self.local_socket}"
        self.local_socket.unlink(missing_ok=True)
        try:
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, start_new_session=True)
        except OSError as e:
            raise TargetError(f"docker over ssh to {self.dest}: cannot run ssh: {e}") from None
        deadline = time.monotonic() + self.connect_timeout_s + 5
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = (self.proc.stderr.read() if self.proc.stderr else b"").decode(errors="replace").strip()
                last = err.splitlines()[-1] if err else f"ssh exited {self.proc.returncode}"
                raise TargetError(f"docker over ssh to {self.dest}: {last}")
            if self.local_socket.exists() and _accepts(self.local_socket):
                return f"unix://{self.local_socket}"
            time.sleep(0.05)
        self.close()
        raise TargetError(f"docker over ssh to {self.dest}: the forward of {self.remote_socket} "
                          f"did not come up within {self.connect_timeout_s + 5:g} s")

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.local_socket.unlink(missing_ok=True)


def _accepts(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(1.0)
        try:
            s.connect(str(path))
            return True
        except OSError:
            return False


def local_url(url: str) -> str:
    """The local unix:// URL of the remote engine at ssh:// `url` (one tunnel per URL per process,
    reopened if its ssh died)."""
    with _lock:
        t = _tunnels.get(url)
        if t is None:
            t = _tunnels[url] = SshTunnel(url)
        return t.open()


def close_all() -> None:
    with _lock:
        for t in _tunnels.values():
            t.close()
        _tunnels.clear()


atexit.register(close_all)
