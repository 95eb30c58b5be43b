"""Progress ejection: a replica that holds running requests but decodes nothing is taken out of rotation.

/health cannot see a decode stall (vLLM issue 45094: 200 while decode ran at 0 tokens/s), so the gateway
reads each replica's own counters, `vllm:generation_tokens_total` and `vllm:num_requests_running`, every
`every_s`. A replica whose running requests stayed above zero while it generated fewer than
`floor_tokens_per_s` per running request for `stall_s` is ejected (chaos.stack.gateway.ejection) and
counted in the admin state's `progress_ejections`, which the embedded stack's supervisor acts on by
restarting it (chaos.bridge.progress_keeper). A scrape that fails proves nothing either way: it neither
starts nor ends a stall. Off unless configured (`gateway.reference.progress_eject_s`, `--progress-eject-s`,
or at run time `POST /admin/config {"progress_eject_s": s}`: how a scenario makes the gateway watch health only).
"""
from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from chaos.stack.gateway.ejection import Ejection

log = logging.getLogger("chaos.gateway")
_GENERATED = re.compile(rb"^vllm:generation_tokens_total(?:\{[^}]*\})?\s+([0-9.eE+-]+)", re.M)
_RUNNING = re.compile(rb"^vllm:num_requests_running(?:\{[^}]*\})?\s+([0-9.eE+-]+)", re.M)
# first tokens (the TTFT histogram's count): not decode progress (a stalled engine still prefills new requests)
_FIRST = re.compile(rb"^vllm:time_to_first_token_seconds_count(?:\{[^}]*\})?\s+([0-9.eE+-]+)", re.M)
# the same floor as the progress-truth verdict (chaos.verify.progress_truth): far below any engine's decode
FLOOR_TOKENS_PER_S = 1.0


def parse_progress(page: bytes) -> tuple[float, float] | None:
    """(decoded tokens, running requests) summed over a replica's engines; None when either is absent. Decoded:
    generated tokens less first tokens where the page counts them (the TTFT histogram's count)."""
    gen, run = _GENERATED.findall(page), _RUNNING.findall(page)
    if not gen or not run:
        return None
    return sum(map(float, gen)) - sum(map(float, _FIRST.findall(page))), sum(map(float, run))


@dataclass
class _Seen:
    t: float
    generated: float
    stalled_since: float | None = None


class ProgressWatch:
    """Per replica: since when it has held running requests without decoding; ejects past `stall_s`."""

    def __init__(self, ejection: Ejection, stall_s: float, floor_tokens_per_s: float = FLOOR_TOKENS_PER_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ejection, self.stall_s, self.floor, self.clock = ejection, stall_s, floor_tokens_per_s, clock
        self._seen: dict[str, _Seen] = {}

    def configure(self, stall_s: float) -> None:
        """A new stall_s (0: off); what was seen before counts for nothing."""
        self.stall_s = stall_s
        self._seen.clear()

    @property
    def every_s(self) -> float:
        """How often to read the counters: about ten reads per stall_s, between 2 and 10 per second (a stall is
        seen at most one read late, and a replica's /metrics is cheap next to its completions)."""
        return min(0.5, max(0.1, self.stall_s / 10))

    def observe(self, replica: str, counters: tuple[float, float] | None) -> float:
        """One read of `replica`'s counters (None: unreadable); returns how long it has been stalled (s)."""
        if counters is None:
            return 0.0
        now, (generated, running) = self.clock(), counters
        last = self._seen.get(replica)
        self._seen[replica] = seen = _Seen(now, generated)
        if last is None or running <= 0 or generated < last.generated or now <= last.t or now - last.t > self.stall_s:
            # first read, idle, a new engine process (its counter starts again), or a read after a blind spell
            # as long as a stall: a new baseline, never a stall that began before anyone saw it
            return 0.0
        if (generated - last.generated) / (now - last.t) >= self.floor * running:
            return 0.0
        seen.stalled_since = last.stalled_since if last.stalled_since is not None else last.t
        stalled_s = now - seen.stalled_since
        if stalled_s >= self.stall_s and not self.ejection.out(replica):
            self.ejection.eject(replica, f"no decode progress for {stalled_s:.1f} s with {running:.0f} request(s) "
                                         "running", progress=True)
            seen.stalled_since = None  # a replica still stalled after its hold is ejected again only after stall_s
        return stalled_s
