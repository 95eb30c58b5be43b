"""No secret in anything the harness wrote: collect the environment's secrets, then scan files for them."""
from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.errors import ChaosError
from chaos.verify.verdict import Verdict

MAX_SCAN_BYTES = 50_000_000


def env_secrets(env: Any) -> dict[str, str]:
    """Every secret the environment holds, by where it comes from (values of 6+ characters only)."""
    from chaos.faults.proxy_admin import token_ref
    from chaos.faults.tokens import stack_token

    found: dict[str, str] = {}
    if env.gateway is not None and env.gateway.admin_token:
        found["gateway.admin_token"] = env.gateway.admin_token
    if env.endpoints.api_key:
        found["endpoints.api_key"] = env.endpoints.api_key
    if env.breaker.hmac_key_env and os.environ.get(env.breaker.hmac_key_env):
        found[f"${env.breaker.hmac_key_env}"] = os.environ[env.breaker.hmac_key_env]
    refs = {f"fault_proxies.{p.name}": token_ref(env, p) for p in env.fault_proxies}
    if env.embedded != "none":
        refs["stack admin token"] = stack_token(env.state_dir)
    for where, ref in refs.items():
        try:
            found[where] = ref.value()
        except ChaosError:
            continue  # a source that is not set holds no secret to leak
    return {k: v for k, v in found.items() if len(v) >= 6}


def token_files(env: Any) -> set[Path]:
    """The files that hold tokens on purpose (they are the source, not a leak)."""
    from chaos.faults.proxy_admin import token_ref
    from chaos.faults.tokens import STACK_TOKEN_FILE

    out = {(Path(env.state_dir) / STACK_TOKEN_FILE).resolve()}
    for p in env.fault_proxies:
        f = token_ref(env, p).file
        if f:
            out.add(Path(f).resolve())
    return out


@dataclass
class SecretScan:
    """What a scan looked at and where it found a secret."""

    scanned: int = 0
    hits: list[str] = field(default_factory=list)

    def verdict(self) -> Verdict:
        v = Verdict("no secret in any file the harness wrote")
        v.add("files_scanned", ">= 1", self.scanned, self.scanned > 0)
        v.add("files_with_secrets", 0, len(self.hits), not self.hits, "; ".join(self.hits[:5]))
        return v


def scan(roots: Iterable[Path], secrets: dict[str, str], *, exclude: Iterable[Path] = ()) -> SecretScan:
    """Read every file under `roots` (but `exclude`) and name each one that contains a secret's value."""
    skip = {Path(p).resolve() for p in exclude}
    out, seen = SecretScan(), set()
    for root in roots:
        for f in (Path(root).rglob("*") if Path(root).exists() else []):
            real = f.resolve()
            if real in skip or real in seen or not f.is_file() or f.stat().st_size > MAX_SCAN_BYTES:
                continue
            seen.add(real)
            data = f.read_bytes()
            out.scanned += 1
            out.hits += [f"{f} contains {where}" for where, s in secrets.items() if s.encode() in data]
    return out
