"""Passive outlier ejection: a replica whose last `after` attempts all failed is taken out of its pool's
rotation for `hold_s`, as Envoy's `consecutive_5xx` outlier detection and nginx's `max_fails` /
`fail_timeout` do. Once the hold is over the next request tries it again, and a failure takes it out at
once (its count is reset only by an answer). A pool never routes around every replica it has: with all
of them out, all are tried, as nginx does when every server is down.

Off unless configured (`gateway.reference.eject_after`, `--eject-after`): the reference gateway without it
keeps sending a replica's share of the traffic to a replica that is down (its pools are fixed at start),
and only a connect error is tried on another replica (chaos.stack.gateway.proxy). Behind a fault proxy
or Toxiproxy a dead replica still answers (502, or a cut), so without ejection a client's retries can
all land on it while it restarts.

A replica can also be taken out for making no decode progress (`eject(..., progress=True)`, from
chaos.stack.gateway.progress); those are counted per replica in `progress_ejections`.
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TypeVar

log = logging.getLogger("chaos.gateway")
R = TypeVar("R")


class Ejection:
    """Consecutive failures per replica name, and until when each one is out (monotonic seconds)."""

    def __init__(self, after: int = 0, hold_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.after, self.hold_s, self.clock = after, hold_s, clock
        self.failures: dict[str, int] = {}
        self.until: dict[str, float] = {}
        self.ejections = 0  # how many times a replica was taken out (the admin state shows it)
        self.progress_ejections: Counter[str] = Counter()  # of those, for no decode progress, per replica

    def record(self, replica: str, ok: bool) -> None:
        """One attempt's outcome on `replica` (the same failure the pool's breaker counts)."""
        if self.after <= 0:
            return
        if ok:
            self.failures[replica] = 0
            return
        n = self.failures[replica] = self.failures.get(replica, 0) + 1
        if n >= self.after and not self.out(replica):
            self.eject(replica, f"{n} failed attempts in a row")

    def eject(self, replica: str, why: str, *, progress: bool = False) -> None:
        """Take `replica` out of rotation for hold_s; `progress`: for making no decode progress."""
        self.until[replica] = self.clock() + self.hold_s
        self.ejections += 1
        if progress:
            self.progress_ejections[replica] += 1
        log.warning("replica %s out of rotation for %.1f s: %s", replica, self.hold_s, why)

    def out(self, replica: str) -> bool:
        return self.until.get(replica, 0.0) > self.clock()

    def rotation(self, replicas: Sequence[R], name: Callable[[R], str]) -> Sequence[R]:
        """The replicas a request may go to: those not out, or all of them when every one is."""
        if not self.until:  # none ever taken out: every request's pick stays as cheap as before
            return replicas
        live = [r for r in replicas if not self.out(name(r))]
        return live or replicas

    def state(self) -> dict[str, object]:
        now = self.clock()
        return {"eject_after": self.after, "hold_s": self.hold_s, "ejections": self.ejections,
                "progress_ejections": dict(sorted(self.progress_ejections.items())),
                "out": {r: round(t - now, 3) for r, t in sorted(self.until.items()) if t > now}}
