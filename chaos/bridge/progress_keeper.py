"""The embedded stack's supervisor acting on progress: it restarts each replica its reference gateway took
out for making no decode progress (chaos.stack.gateway.progress), as an orchestrator restarts what its
load balancer's outlier detection marked. /health stays 200 through a decode stall, so the supervisor's
own restart-on-exit never fires; this is what does.

It polls the gateway's `GET /admin/state` every `every_s` and restarts a replica whenever its count in
`ejection.progress_ejections` rose (a gateway restart starts the counts again: a lower count is a new
baseline, not a restart).
"""
from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from chaos.targets import Target


class ProgressKeeper:
    """A thread restarting the replicas the gateway ejected for no decode progress."""

    def __init__(self, admin_url: str, token: str | None, targets: Mapping[str, Target], *, every_s: float = 0.1,
                 log: Callable[[str], None] = lambda s: None,
                 fetch: Callable[[], dict[str, Any]] | None = None) -> None:
        self.admin_url, self.token, self.targets, self.every_s, self.log = admin_url.rstrip("/"), token, targets, every_s, log
        self.fetch = fetch or self._fetch
        self.seen: dict[str, int] = {}
        self.restarted: list[str] = []  # every restart it made, in order (replica names)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _fetch(self) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        req = urllib.request.Request(f"{self.admin_url}/admin/state", headers=headers)
        with urllib.request.urlopen(req, timeout=max(1.0, self.every_s * 4)) as r:
            data: dict[str, Any] = json.loads(r.read())
        return data

    def poll_once(self) -> list[str]:
        """Read the gateway's counts once and restart the replicas whose count rose; returns their names."""
        try:
            counts = self.fetch().get("ejection", {}).get("progress_ejections", {})
        except (OSError, ValueError, urllib.error.URLError):
            return []  # a gateway that does not answer says nothing about the replicas
        out = []
        for name, count in counts.items():
            before = self.seen.get(name, 0)
            self.seen[name] = count
            if count > before and name in self.targets:
                self.log(f"{name}: the gateway took it out for making no decode progress; restarting it")
                self.targets[name].restart()
                self.restarted.append(name)
                out.append(name)
        return out

    def start(self) -> ProgressKeeper:
        self._thread = threading.Thread(target=self._run, name="progress-keeper", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.poll_once()
            except Exception as e:  # a failed restart must not end the watch; the next ejection tries again
                self.log(f"progress keeper: {type(e).__name__}: {e}")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10.0)
            self._thread = None
