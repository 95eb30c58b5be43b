"""The one Toxiproxy HTTP API client, shared by the faults and the embedded stack.

Stdlib only, so `chaos cleanup` works with nothing else installed. Not `toxiproxy-python` (0.1.1,
the PyPI client), for three facts read from its source: it keeps the API's host and port as
class attributes of `APIConsumer`, so one process cannot talk to a local and a remote Toxiproxy at
once; it sends every request without a timeout, so a dead API hangs the harness; and it needs
`future` and `requests` for what urllib does here. It lives outside `chaos.faults` so that the
stand-in stack (`chaos.stack.toxiproxy`) does not import the harness's fault layer."""
from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from typing import Any

from chaos.errors import StackError

TOXIC_TYPES = ("latency", "bandwidth", "slow_close", "timeout", "reset_peer", "slicer", "limit_data")


class ToxiproxyError(StackError):
    """The Toxiproxy API refused a call or did not answer."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Toxiproxy:
    """Client for one Toxiproxy API, e.g. Toxiproxy("http://127.0.0.1:8474")."""

    def __init__(self, api: str, *, timeout: float = 5.0) -> None:
        self.api = api.rstrip("/")
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"Toxiproxy({self.api!r})"

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.api + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        req.add_header("User-Agent", "llm-chaos")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace").strip()
            raise ToxiproxyError(f"toxiproxy {self.api}: {method} {path} -> {e.code} {detail}", status=e.code) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ToxiproxyError(f"toxiproxy {self.api} not answering ({method} {path}): {reason}") from None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode(errors="replace")

    def version(self) -> str:
        """The server version; raises ToxiproxyError if it does not answer."""
        v = self._call("GET", "/version")
        return v.get("version", "") if isinstance(v, dict) else str(v).strip()

    def ping(self) -> bool:
        """True if the API answers."""
        try:
            self.version()
        except ToxiproxyError:
            return False
        return True

    def proxies(self) -> dict[str, dict[str, Any]]:
        return self._call("GET", "/proxies") or {}

    def proxy(self, name: str) -> dict[str, Any]:
        got: dict[str, Any] = self._call("GET", f"/proxies/{name}")
        return got

    def create_proxy(self, name: str, listen: str, upstream: str, *, enabled: bool = True) -> dict[str, Any]:
        got: dict[str, Any] = self._call("POST", "/proxies",
                                         {"name": name, "listen": listen, "upstream": upstream, "enabled": enabled})
        return got

    def populate(self, proxies: list[dict[str, Any]]) -> Any:
        """Create or replace proxies in one call."""
        return self._call("POST", "/populate", proxies)

    def delete_proxy(self, name: str) -> None:
        self._call("DELETE", f"/proxies/{name}")

    def set_enabled(self, name: str, enabled: bool) -> dict[str, Any]:
        got: dict[str, Any] = self._call("POST", f"/proxies/{name}", {"enabled": enabled})
        return got

    def toxics(self, proxy: str) -> list[dict[str, Any]]:
        return self._call("GET", f"/proxies/{proxy}/toxics") or []

    def add_toxic(self, proxy: str, name: str, type: str, *, stream: str = "downstream",
                  toxicity: float = 1.0, attributes: dict[str, Any] | None = None) -> dict[str, Any]:
        body = {"name": name, "type": type, "stream": stream, "toxicity": toxicity, "attributes": attributes or {}}
        got: dict[str, Any] = self._call("POST", f"/proxies/{proxy}/toxics", body)
        return got

    def remove_toxic(self, proxy: str, name: str, *, missing_ok: bool = True) -> bool:
        """Remove a toxic; returns False if it was already gone (and missing_ok)."""
        try:
            self._call("DELETE", f"/proxies/{proxy}/toxics/{name}")
        except ToxiproxyError as e:
            if missing_ok and e.status == 404:
                return False
            raise
        return True

    def reset(self) -> None:
        """Re-enable every proxy and remove every toxic."""
        self._call("POST", "/reset")
