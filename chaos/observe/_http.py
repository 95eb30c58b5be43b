"""A tiny keep-alive HTTP client for observers (stdlib only, one connection, reconnect on error)."""
from __future__ import annotations

import http.client
import socket
from urllib.parse import urlsplit

from chaos.errors import ConfigError


class HttpGetter:
    """Requests against one base URL over one persistent connection; errors classify simply."""

    def __init__(self, base_url: str, timeout_s: float = 2.0) -> None:
        u = urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ConfigError(f"observer URL {base_url!r}: expected http://host:port[/prefix]")
        self.scheme, self.host = u.scheme, u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.prefix = u.path.rstrip("/")
        self.timeout_s = timeout_s
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
            self._conn = cls(self.host, self.port, timeout=self.timeout_s)
        return self._conn

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        """(status, lower-cased headers, body); raises OSError/http.client errors on failure."""
        conn = self._connection()
        try:
            conn.request(method, self.prefix + path, body=body, headers=headers or {})
            resp = conn.getresponse()
            data = resp.read()
            hdrs = {k.lower(): v for k, v in resp.getheaders()}
            if resp.will_close:
                self.close()
            return resp.status, hdrs, data
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def error_class(exc: BaseException) -> str:
    """timeout | reset (refused, reset, closed) | other."""
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timeout"
    if isinstance(exc, (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine, OSError)):
        return "reset"
    return "other"
