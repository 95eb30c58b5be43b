"""The HTTP/SSE fault proxy: a Go program in this directory (docs/faultproxy.md), and its Python controller.

`find_binary()` finds `chaos-faultproxy` (building it with Go from these sources when needed);
`FaultProxyServer` runs one in front of one replica and always stops what it started.
"""
from __future__ import annotations

import http.client
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Protocol

from chaos.errors import StackError
from chaos.shared import proc as _proc

SRC = Path(__file__).resolve().parent
REPO = SRC.parents[2]
BINARY = "chaos-faultproxy"


class TokenSource(Protocol):
    """Where the proxy's admin token lives (the harness's TokenRef is one): a file or an environment variable."""

    @property
    def file(self) -> str | None: ...

    @property
    def env(self) -> str | None: ...

    def value(self) -> str: ...


def _stale(binary: Path) -> bool:
    built = binary.stat().st_mtime
    return any(p.stat().st_mtime > built for p in [*SRC.glob("*.go"), SRC / "go.mod"] if p.exists())


def find_binary(*, build: bool = True) -> str:
    """chaos-faultproxy from $CHAOS_FAULTPROXY_BIN, <repo>/.tools/bin (rebuilt when its sources changed) or $PATH."""
    explicit = os.environ.get("CHAOS_FAULTPROXY_BIN")
    if explicit:
        if os.path.isfile(explicit) and os.access(explicit, os.X_OK):
            return explicit
        raise StackError(f"$CHAOS_FAULTPROXY_BIN={explicit} is not an executable file")
    local = REPO / ".tools" / "bin" / BINARY
    sources = (SRC / "go.mod").exists()
    if local.exists() and not (sources and _stale(local)):
        return str(local)
    if sources and build and shutil.which("go"):
        return build_binary(local)
    if local.exists():
        return str(local)
    on_path = shutil.which(BINARY)
    if on_path:
        return on_path
    raise StackError(f"{BINARY} not found: run `make setup` (needs Go), put it on $PATH, or set CHAOS_FAULTPROXY_BIN")


def build_binary(out: Path) -> str:
    """`go build` the proxy into `out`; StackError with Go's first error line on failure."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
    proc = subprocess.run(["go", "build", "-trimpath", "-o", str(tmp), "."], cwd=SRC, capture_output=True, text=True,
                          env={**os.environ, "CGO_ENABLED": "0"}, timeout=300)
    if proc.returncode != 0:
        first = (proc.stderr.strip().splitlines() or ["(no output)"])[0]
        raise StackError(f"building {BINARY} failed: {first}")
    os.replace(tmp, out)  # atomic: a concurrent build never leaves a half-written binary in place
    return str(out)


def proxy_argv(binary: str, *, listen: str, upstream: str, name: str, token_file: str | None = None,
               request_log: str | None = None, admin_listen: str | None = None, mirror_refusal: bool = False) -> list[str]:
    """The fault proxy's command line: the one spelling of its flags, for this wrapper, the lab's deploy and
    `chaos proxy`."""
    argv = [binary, "--listen", listen, "--upstream", upstream, "--name", name]
    if token_file:
        argv += ["--token-file", token_file]
    if request_log:
        argv += ["--request-log", request_log]
    if admin_listen:
        argv += ["--admin-listen", admin_listen]
    if mirror_refusal:
        argv += ["--mirror-refusal"]  # without --admin-listen the proxy refuses the flag: its own one line
    return argv


class FaultProxyServer:
    """One chaos-faultproxy process in front of one upstream; a context manager."""

    def __init__(self, name: str, listen: str, upstream: str, token: TokenSource, *, request_log: str | None = None,
                 log_path: str | os.PathLike[str] | None = None, binary: str | None = None,
                 admin_listen: str | None = None, mirror_refusal: bool = False,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if not token.file and not token.env:
            raise StackError(f"fault proxy {name}: the token must come from a file or an environment variable")
        if mirror_refusal and not admin_listen:
            raise StackError(f"fault proxy {name}: mirror_refusal needs admin_listen (the admin API must stay reachable)")
        self.name, self.listen, self.upstream, self.token = name, listen, upstream, token
        self.admin_listen, self.mirror_refusal = admin_listen, mirror_refusal
        self.request_log, self.binary = request_log, binary
        self.log_path = Path(log_path) if log_path else None
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._sleep = sleep

    @classmethod
    def for_config(cls, cfg: Any, token: TokenSource, state_dir: str | os.PathLike[str]) -> FaultProxyServer:
        d = Path(state_dir).resolve()
        return cls(cfg.name, cfg.listen, cfg.upstream, token, request_log=str(d / f"{cfg.name}.proxy.jsonl"),
                   log_path=d / f"{cfg.name}.faultproxy.log", admin_listen=cfg.admin_listen,
                   mirror_refusal=cfg.mirror_refusal)

    @property
    def url(self) -> str:
        """Where requests go through the proxy."""
        return f"http://{self.listen}"

    @property
    def admin_url(self) -> str:
        """Where its admin API and request log answer: `url` unless it has an admin listener of its own."""
        return f"http://{self.admin_listen or self.listen}"

    def healthy(self) -> bool:
        """True when /_chaos/health answers 200 (no token needed)."""
        try:
            with urllib.request.urlopen(f"{self.admin_url}/_chaos/health", timeout=5.0) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError):
            return False

    def command(self) -> list[str]:
        return proxy_argv(self.binary or find_binary(), listen=self.listen, upstream=self.upstream, name=self.name,
                          token_file=self.token.file, request_log=self.request_log, admin_listen=self.admin_listen,
                          mirror_refusal=self.mirror_refusal)

    def start(self, timeout: float = 10.0) -> FaultProxyServer:
        """Start the proxy and wait until /_chaos/health answers."""
        if self.healthy():
            raise StackError(f"something already answers on {self.admin_url}; not starting fault proxy {self.name}")
        env = dict(os.environ)
        if self.token.env:
            env["CHAOS_PROXY_TOKEN"] = self.token.value()
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(self.command(), stdout=self._log or subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                     env=env, process_group=_proc.STACK_PROCESS_GROUP)  # see there: one scheduling group
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.stop()
                raise StackError(f"fault proxy {self.name} exited with {code} at start on {self.url}"
                                 + (f"; see {self.log_path}" if self.log_path else ""))
            if self.healthy():
                return self
            self._sleep(0.05)
        self.stop()
        raise StackError(f"fault proxy {self.name} on {self.admin_url} did not answer within {timeout:g}s")

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM, then SIGKILL."""
        proc, self.proc = self.proc, None
        _proc.terminate(proc, timeout)
        if self._log:
            self._log.close()
            self._log = None

    def __enter__(self) -> FaultProxyServer:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()
