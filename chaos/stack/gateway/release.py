"""Gray release at the gateway: which requests the canary may serve, and shadow traffic.

- `admit`: request attributes the canary may serve, by header (`{"x-user-tier": ["standard"]}`):
  a request whose header is missing or holds another value never goes to the canary (VIP last).
- `mirror`: the share of stable-served inference requests copied to the canary after the user's
  answer is complete (nginx's `mirror` directive does the same). The canary's answer is discarded;
  the pair (stable's text and status, canary's text and status, both latencies) is kept for
  `GET /admin/mirror`, so a shadow stage is judged on what the canary WOULD have answered.
Mirrored calls do not count in the canary's breaker windows: the breaker guards users, and no user
sees a shadow answer.
"""
from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MIRROR_HEADER = "x-chaos-mirror"  # on each mirrored call, so replica-side logs can tell them apart
TEXT_LIMIT = 64 * 1024            # bytes of one answer kept for comparison


class ReleaseError(ValueError):
    """A release setting the admin API refuses (its message names the field)."""


@dataclass(frozen=True)
class Release:
    """The gateway's gray-release stage."""

    admit: Mapping[str, frozenset[str]] | None = None  # None: every request may go to the canary
    mirror: float = 0.0

    def admits(self, headers: Mapping[str, str]) -> bool:
        if not self.admit:
            return True
        return all(headers.get(h, "") in values for h, values in self.admit.items())

    def to_json(self) -> dict[str, Any]:
        return {"admit": None if self.admit is None else {h: sorted(v) for h, v in self.admit.items()},
                "mirror": self.mirror}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], current: Release) -> Release:
        """`current` with the fields `data` gives; ReleaseError names a bad one."""
        admit, mirror = current.admit, current.mirror
        if "admit" in data:
            raw = data["admit"]
            if raw is not None and (not isinstance(raw, dict) or not all(
                    isinstance(v, list) and all(isinstance(x, str) for x in v) for v in raw.values())):
                raise ReleaseError("admit must be null or {header: [values]}")
            admit = None if raw is None else {str(h).lower(): frozenset(v) for h, v in raw.items()}
        if "mirror" in data:
            m = data["mirror"]
            if isinstance(m, bool) or not isinstance(m, (int, float)) or not 0 <= m <= 1:
                raise ReleaseError("mirror must be a number in [0, 1]")
            mirror = float(m)
        return cls(admit, mirror)


@dataclass
class MirrorLog:
    """The last `keep` mirrored pairs, oldest first."""

    keep: int = 20_000
    pairs: deque[dict[str, Any]] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, pair: dict[str, Any]) -> None:
        with self._lock:
            self.pairs.append(pair)
            while len(self.pairs) > self.keep:
                self.pairs.popleft()

    def since(self, t: float) -> list[dict[str, Any]]:
        with self._lock:
            return [p for p in self.pairs if p["t"] >= t]


def answer_text(body: bytes, sse: bool) -> str:
    """The generated text of an OpenAI-compatible answer (a whole JSON body or an SSE stream)."""
    docs: list[Any] = []
    if sse:
        for line in body.decode("utf-8", "replace").splitlines():
            if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
                try:
                    docs.append(json.loads(line[5:]))
                except ValueError:
                    continue
    else:
        try:
            docs.append(json.loads(body))
        except ValueError:
            return ""
    parts = []
    for d in docs:
        for ch in (d.get("choices") or []) if isinstance(d, dict) else []:
            piece = ch.get("text") or (ch.get("delta") or {}).get("content") or (ch.get("message") or {}).get("content")
            if piece:
                parts.append(piece)
    return "".join(parts)
