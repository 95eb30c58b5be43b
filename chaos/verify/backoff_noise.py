"""How much spread scheduler noise alone puts into measured retry waits, so jitter is judged beyond it.

Every wait is measured at the recorder, so it also holds the client's oversleep, its request-building
time and the recorder's own delay in stamping the arrival. On a loaded machine (load 10-23 on two cores)
that noise alone spreads a fixed 600 ms wait by tens of ms (cv 0.02-0.04): more than the 2 % spread the
jitter rule asks for, so a lockstep client passed it. The probe is a control measured at the same time:
fixed-wait, no-jitter copies in their own recorder slots, whose spread is noise and nothing else.
"""
from __future__ import annotations

import math
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

PREFIX = "q"          # recorder slots of the control copies
MIN_COPIES = 3        # control copies run at once: as many as the clients judged, at least this
MAX_ROUNDS = 20       # logical requests per copy at most (bounded loop)
_BODY = b'{"model":"sim-model","messages":[{"role":"user","content":"noise probe"}],"max_tokens":1}'


class _Gap(Protocol):
    key: str
    index: int
    seconds: float


class _Slots(Protocol):
    def slot_url(self, slot: int | str) -> str: ...


class NoiseProbe:
    """Fixed-wait, no-jitter control copies run beside the client until stop(): their waits are noise.

    As many copies as the clients judged, started together, and run as the clients are: threads of
    this process beside callables (copies that wake at once queue for the CPU, the GIL and the
    recorder), processes beside commands (their own interpreters; this module is run as a script, it
    imports only the standard library). The control is the lockstep client the rule tells apart."""

    def __init__(self, rec: _Slots, wait_s: float, copies: int = MIN_COPIES, *, processes: bool = False) -> None:
        self.wait_s = wait_s
        self._stop = threading.Event()
        self._urls = [rec.slot_url(f"{PREFIX}{i}") for i in range(copies)]
        self._processes = processes
        self._threads: list[threading.Thread] = []
        self._procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> NoiseProbe:
        for i, url in enumerate(self._urls):
            if self._processes:
                self._procs.append(subprocess.Popen(
                    [sys.executable, __file__, url, str(self.wait_s), str(i)], stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
            else:
                t = threading.Thread(target=copy_loop, args=(url, self.wait_s, i, self._stop.is_set), daemon=True,
                                     name=f"backoff-noise-{i}")
                t.start()
                self._threads.append(t)
        return self

    def halt(self) -> None:
        """Stop sending now (the retry phase is over): the control's own load would only add noise
        to the give-up phase's long waits, which the cap rule judges. Idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        from chaos.shared.proc import kill_group_now  # here, not at the top: a copy run as a script imports only the stdlib

        for p in self._procs:
            kill_group_now(p.pid)  # the session start() created for this copy only

    def stop(self, timeout_s: float = 5.0) -> None:
        self.halt()
        for p in self._procs:
            p.wait(timeout_s)
        for t in self._threads:
            t.join(timeout_s)


def copy_loop(url: str, wait_s: float, copy: int, stopped: Callable[[], bool] = lambda: False) -> None:
    """One control copy: logical requests one after another, each retried after exactly wait_s."""
    for r in range(MAX_ROUNDS):
        if stopped():
            return
        req = urllib.request.Request(url + "/v1/chat/completions", data=_BODY, headers={
            "x-request-id": f"noise-{copy}-{r}", "Content-Type": "application/json"})
        for _ in range(16):  # the slot fails fail_first times, then answers
            try:
                urllib.request.urlopen(req, timeout=2).read()
                break
            except Exception:  # a failed attempt is what the slot is for: wait, as a lockstep client would
                if stopped():
                    return
                time.sleep(wait_s)  # as the clients judged sleep: its oversleep is noise too


def control_groups(gs: Iterable[_Gap]) -> list[list[float]]:
    """The control's waits grouped as the clients' are: one step of all copies in one round (copies
    start each round together, as the clients start together); pooling rounds would add the drift of
    the load between rounds to the noise, and that drift is not in any one group of the clients'."""
    groups: dict[tuple[str, int], list[float]] = {}
    for g in gs:
        rid = g.key.split("/", 1)[-1]  # the control's ids are noise-<copy>-<round>
        groups.setdefault((rid.rsplit("-", 1)[-1], g.index), []).append(g.seconds)
    return list(groups.values())


def deviations(groups: Sequence[Sequence[float]]) -> list[float]:
    """Absolute distance of each wait from the median of its group (one group = one retry step), in s."""
    out: list[float] = []
    for xs in groups:
        if len(xs) >= 2:
            med = statistics.median(xs)
            out += [abs(x - med) for x in xs]
    return out


def p_noise_alone(client: Sequence[float], noise: Sequence[float]) -> float:
    """One-sided Mann-Whitney p: the chance that deviations drawn like the noise control's rank as high
    as the client's do. Ties count half a pair against the client (conservative)."""
    n, m = len(client), len(noise)
    u = sum(1.0 if c > z else 0.5 if c == z else 0.0 for c in client for z in noise)
    if n * m > 4000:  # normal approximation; exact counting would be slow and is not needed there
        mu, sd = n * m / 2, math.sqrt(n * m * (n + m + 1) / 12)
        return 0.5 * math.erfc((u - 0.5 - mu) / (sd * math.sqrt(2)))
    dist = _u_counts(n, m)
    need = math.ceil(u - 1e-9)  # P(U >= u), ties rounded in the noise's favour
    return sum(dist[need:]) / math.comb(n + m, n)


def _u_counts(n: int, m: int) -> list[int]:
    """Number of orderings of n client and m noise values for each U = 0..n*m (no ties)."""
    # row[k][u]: orderings of i client and k noise values with U = u; built up one client value at a time
    row = [[1] for _ in range(m + 1)]  # zero client values: U = 0 in exactly one way
    for _ in range(n):
        new: list[list[int]] = []
        for k in range(m + 1):
            # the largest value is a client one (adds k pairs) or a noise one (adds none)
            a = [0] * k + row[k]
            b = new[k - 1] if k else []
            size = max(len(a), len(b))
            new.append([(a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(size)])
        row = new
    return row[m]


if __name__ == "__main__":  # one control copy as its own process: URL WAIT_S COPY
    copy_loop(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]))
