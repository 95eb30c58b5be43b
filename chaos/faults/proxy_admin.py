"""A client for the fault proxy's admin API (`/_chaos/rules`); stdlib only, so cleanup needs nothing else."""
from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from chaos.errors import ChaosError, StackError
from chaos.faults.tokens import TokenRef, as_ref

RULE_PREFIX = "chaos-"


class FaultProxyError(StackError):
    """The fault proxy refused a call (its one-line reason) or did not answer."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class FaultProxyAdmin:
    """Admin client for one `chaos-faultproxy`, e.g. FaultProxyAdmin("http://127.0.0.1:18211", TokenRef(env=...))."""

    def __init__(self, url: str, token: TokenRef | str, *, name: str | None = None, timeout: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.token = as_ref(token)
        self.name = name or self.url
        self.timeout = timeout

    @classmethod
    def of(cls, server: Any) -> FaultProxyAdmin:
        """The admin client of a running fault proxy server (url, token, name; admin_url if it has its own)."""
        return cls(getattr(server, "admin_url", server.url), server.token, name=server.name)

    def __repr__(self) -> str:
        return f"FaultProxyAdmin({self.url!r}, {self.token!r})"

    def _call(self, method: str, path: str, body: Any = None, *, auth: bool = True) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(self.token.header() if auth else {})})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                raw = r.read()
        except urllib.error.HTTPError as e:
            raise FaultProxyError(f"fault proxy {self.name}: {method} {path} -> {e.code} {_reason(e.read())}",
                                  status=e.code) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
            raise FaultProxyError(f"fault proxy {self.name} ({self.url}) not answering: "
                                  f"{getattr(e, 'reason', e)}") from None
        return json.loads(raw) if raw else None

    def health(self) -> dict[str, Any]:
        got: dict[str, Any] = self._call("GET", "/_chaos/health", auth=False)
        return got

    def ping(self) -> bool:
        try:
            self.health()
            return True
        except FaultProxyError:
            return False

    def rules(self) -> list[dict[str, Any]]:
        return list((self._call("GET", "/_chaos/rules") or {}).get("rules", []))

    def rule(self, name: str) -> dict[str, Any] | None:
        return next((r for r in self.rules() if r.get("name") == name), None)

    def set_rule(self, rule: dict[str, Any]) -> dict[str, Any]:
        got: dict[str, Any] = self._call("POST", "/_chaos/rules", rule)
        return got

    def remove_rule(self, name: str) -> dict[str, Any] | None:
        """The rule's final counters, or None when the proxy has no such rule."""
        try:
            got: dict[str, Any] | None = self._call("DELETE", f"/_chaos/rules/{urllib.parse.quote(name)}")
            return got
        except FaultProxyError as e:
            if e.status == 404:
                return None
            raise

    def clear(self, prefix: str = RULE_PREFIX) -> list[str]:
        got = self._call("DELETE", f"/_chaos/rules?prefix={urllib.parse.quote(prefix)}") or {}
        return list(got.get("removed", []))


def _reason(raw: bytes) -> str:
    try:
        err = json.loads(raw).get("error")
        return err if isinstance(err, str) else json.dumps(err)[:300]
    except (ValueError, AttributeError):
        return raw.decode("utf-8", "replace").strip()[:300]


def admins_for(env: Any) -> dict[str, FaultProxyAdmin]:
    """One admin client per fault proxy the environment declares, keyed by proxy name."""
    return {p.name: FaultProxyAdmin(p.admin_url, token_ref(env, p), name=p.name) for p in getattr(env, "fault_proxies", [])}


def token_ref(env: Any, proxy: Any) -> TokenRef:
    """Where a fault proxy's token lives: its token_file, the embedded stack's token file, or its token_env."""
    from chaos.faults.tokens import stack_token

    if proxy.token_file:
        return TokenRef(file=proxy.token_file)
    if getattr(env, "embedded", "none") != "none":
        return stack_token(env.state_dir)
    return TokenRef(env=proxy.token_env)


def sweep_rules(env: Any) -> list[str]:
    """Remove every chaos-* rule on the environment's fault proxies (belt and braces for the ledger)."""
    out = []
    for name, admin in admins_for(env).items():
        admin.timeout = 2.0
        try:
            out += [f"swept rule {r} on fault proxy {name}" for r in admin.clear(RULE_PREFIX)]
        except ChaosError:  # not running, or no token: nothing of ours can be set there
            pass
    return out
