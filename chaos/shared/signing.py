"""HMAC-SHA256 request signing shared by the reference client and the gateway.

The signature covers method, path, timestamp, nonce and the SHA-256 of the body:
    METHOD \n PATH \n TIMESTAMP \n NONCE \n hex(sha256(body))
Keys come only from environment variables; nothing here logs a key or a signature.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
import time
from collections import OrderedDict

from chaos.errors import ConfigError

HDR_TIMESTAMP = "X-Chaos-Timestamp"
HDR_NONCE = "X-Chaos-Nonce"
HDR_SIGNATURE = "X-Chaos-Signature"


class SignatureError(ValueError):
    """The request's signature is missing, wrong, expired or replayed (-> 401)."""


def key_from_env(var: str) -> bytes:
    """Read a signing key from an environment variable; never from a file in the repo."""
    value = os.environ.get(var)
    if not value:
        raise ConfigError(f"HMAC signing key: environment variable ${{{var}}} is not set")
    return value.encode()


def _payload(method: str, path: str, timestamp: str, nonce: str, body: bytes) -> bytes:
    return "\n".join([method.upper(), path, timestamp, nonce, hashlib.sha256(body).hexdigest()]).encode()


def sign(key: bytes, method: str, path: str, body: bytes, *, timestamp: float | None = None,
         nonce: str | None = None) -> dict[str, str]:
    """Headers that sign this request."""
    ts = str(int(time.time() if timestamp is None else timestamp))
    nonce = nonce or secrets.token_hex(12)
    sig = hmac.new(key, _payload(method, path, ts, nonce, body), hashlib.sha256).hexdigest()
    return {HDR_TIMESTAMP: ts, HDR_NONCE: nonce, HDR_SIGNATURE: sig}


class NonceCache:
    """Remembers nonces seen within the window so a replay is refused."""

    def __init__(self, window_s: float, max_size: int = 100_000) -> None:
        self.window_s = window_s
        self.max_size = max_size
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def check_and_add(self, nonce: str, now: float) -> bool:
        """True when the nonce is new (and is now remembered)."""
        with self._lock:
            while self._seen and (next(iter(self._seen.values())) < now - self.window_s or len(self._seen) > self.max_size):
                self._seen.popitem(last=False)
            if nonce in self._seen:
                return False
            self._seen[nonce] = now
            return True


def verify(key: bytes, method: str, path: str, body: bytes, headers: dict[str, str] | object, *,
           window_s: float = 300.0, nonces: NonceCache | None = None, now: float | None = None) -> None:
    """Raise SignatureError unless the headers sign this request, in time and not replayed."""
    get = headers.get  # type: ignore[union-attr]
    ts, nonce, sig = get(HDR_TIMESTAMP), get(HDR_NONCE), get(HDR_SIGNATURE)
    if not (ts and nonce and sig):
        raise SignatureError("missing signature headers")
    try:
        ts_f = float(ts)
    except ValueError:
        raise SignatureError("bad timestamp") from None
    now = time.time() if now is None else now
    if abs(now - ts_f) > window_s:
        raise SignatureError("timestamp outside the allowed window")
    expected = hmac.new(key, _payload(method, path, ts, nonce, body), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), str(sig).encode()):
        raise SignatureError("signature does not match")
    if nonces is not None and not nonces.check_and_add(nonce, now):
        raise SignatureError("replayed nonce")
