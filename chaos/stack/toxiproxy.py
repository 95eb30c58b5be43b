"""Start and stop a real toxiproxy-server on a given host:port and create the environment's proxies."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO
from urllib.parse import urlparse

from chaos.errors import StackError
from chaos.shared import proc as _proc
from chaos.shared.toxiproxy import Toxiproxy, ToxiproxyError

REPO = Path(__file__).resolve().parents[2]


def find_binary() -> str:
    """toxiproxy-server from $CHAOS_TOXIPROXY_BIN, $PATH or <repo>/.tools/bin; StackError if absent."""
    explicit = os.environ.get("CHAOS_TOXIPROXY_BIN")
    candidates: list[str | None] = [explicit] if explicit else []
    candidates += [shutil.which("toxiproxy-server"), str(REPO / ".tools" / "bin" / "toxiproxy-server")]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise StackError("toxiproxy-server not found: put it in $PATH or .tools/bin/, or set CHAOS_TOXIPROXY_BIN")


def split_api(api: str) -> tuple[str, int]:
    """'http://127.0.0.1:8474' -> ('127.0.0.1', 8474)."""
    u = urlparse(api if "://" in api else f"http://{api}")
    if not u.hostname or not u.port:
        raise StackError(f"toxiproxy api {api!r}: expected http://HOST:PORT")
    return u.hostname, u.port


class ToxiproxyServer:
    """One toxiproxy-server process; a context manager that always stops what it started."""

    def __init__(self, host: str = "127.0.0.1", port: int = 8474, *, binary: str | None = None,
                 log_path: str | os.PathLike[str] | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.host, self.port = host, port
        self.binary = binary
        self.log_path = Path(log_path) if log_path else None
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._sleep = sleep

    @classmethod
    def for_api(cls, api: str, **kw: object) -> ToxiproxyServer:
        host, port = split_api(api)
        return cls(host, port, **kw)  # type: ignore[arg-type]

    @property
    def api(self) -> str:
        return f"http://{self.host}:{self.port}"

    def client(self) -> Toxiproxy:
        return Toxiproxy(self.api)

    def start(self, timeout: float = 10.0) -> ToxiproxyServer:
        """Start the server and wait until /version answers."""
        if self.client().ping():
            raise StackError(f"something already answers on {self.api}; not starting a second toxiproxy")
        binary = self.binary or find_binary()
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "ab")
        out = self._log if self._log else subprocess.DEVNULL
        self.proc = subprocess.Popen([binary, "-host", self.host, "-port", str(self.port)],
                                     stdout=out, stderr=subprocess.STDOUT,
                                     process_group=_proc.STACK_PROCESS_GROUP)  # see there: one scheduling group
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.stop()
                raise StackError(f"toxiproxy-server exited with {self.proc.returncode} at start on {self.api}")
            if self.client().ping():
                return self
            self._sleep(0.05)
        self.stop()
        raise StackError(f"toxiproxy-server on {self.api} did not answer /version within {timeout:g}s")

    def create_proxies(self, proxies: Iterable[object]) -> None:
        """Create (or replace) proxies from ToxiproxyProxy models or dicts with name/listen/upstream."""
        body = []
        for p in proxies:
            d = p if isinstance(p, dict) else p.model_dump()  # type: ignore[attr-defined]
            body.append({"name": d["name"], "listen": d["listen"], "upstream": d["upstream"], "enabled": True})
        try:
            self.client().populate(body)
        except ToxiproxyError as e:
            raise StackError(f"could not create toxiproxy proxies: {e}") from None

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL)."""
        proc, self.proc = self.proc, None
        _proc.terminate(proc, timeout)
        if self._log:
            self._log.close()
            self._log = None

    def __enter__(self) -> ToxiproxyServer:
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_for_env(env: object, *, log_path: str | None = None) -> ToxiproxyServer:
    """Start the toxiproxy an Environment names and create its proxies."""
    cfg = getattr(env, "toxiproxy", None)
    if cfg is None:
        raise StackError(f"environment {getattr(env, 'name', '?')!r} has no toxiproxy section")
    server = ToxiproxyServer.for_api(cfg.api, log_path=log_path).start()
    try:
        server.create_proxies(cfg.proxies)
    except BaseException:
        server.stop()
        raise
    return server
