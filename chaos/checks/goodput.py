"""Goodput: requests that succeeded within every given objective, as a share of requests or per second."""
from __future__ import annotations

from chaos.checks.base import MIN_REQUESTS, Bound, Window, require
from chaos.load.records import RequestRecord


class _Goodput(Bound):
    def __init__(self, limit: float, per_s: bool, objectives: dict[str, float | None], prompt_class: str | None,
                 min_requests: int) -> None:
        require(min_requests >= 1, "min_requests", "at least 1", min_requests)
        for m, lim in objectives.items():
            require(lim is None or lim > 0, f"{m}_s", "seconds > 0", lim)
        self.limit, self.per_s, self.prompt_class, self.min_requests = limit, per_s, prompt_class, min_requests
        self.objectives = {m: s for m, s in objectives.items() if s is not None}
        self.op = ">="
        self.name = ("goodput per s" if per_s else "goodput") + (f" ({prompt_class})" if prompt_class else "")

    def good(self, r: RequestRecord) -> bool:
        return r.ok and all(getattr(r, m) is not None and getattr(r, m) <= s for m, s in self.objectives.items())

    def value(self, done: list[RequestRecord], window: Window) -> float:
        good = sum(1 for r in done if self.good(r))
        if not self.per_s:
            return good / len(done)
        span = window[1] - window[0] if window else max(r.t_end for r in done) - min(r.t_send for r in done)
        return good / max(span, 1e-9)

    def expected(self) -> str:
        if self.per_s:
            return f">= {self.limit:g} requests/s within every objective"
        return f">= {self.limit:.0%} of requests within every objective"

    def show(self, value: float) -> str:
        return f"{value:.2f}/s" if self.per_s else f"{value:.1%}"


def goodput_share_above(share: float, *, e2e_s: float | None = None, ttft_s: float | None = None,
                        tpot_s: float | None = None, prompt_class: str | None = None,
                        min_requests: int = MIN_REQUESTS) -> Bound:
    """Share (0..1) of final requests that succeeded within every given objective (seconds)."""
    require(0 <= share <= 1, "share", "a share of requests in 0..1", share)
    return _Goodput(share, False, {"e2e": e2e_s, "ttft": ttft_s, "tpot": tpot_s}, prompt_class, min_requests)


def goodput_per_s_above(per_s: float, *, e2e_s: float | None = None, ttft_s: float | None = None,
                        tpot_s: float | None = None, prompt_class: str | None = None,
                        min_requests: int = MIN_REQUESTS) -> Bound:
    """Final requests per second of the window (or of the records' span) that succeeded within every objective."""
    require(per_s >= 0, "per_s", "requests per second >= 0", per_s)
    return _Goodput(per_s, True, {"e2e": e2e_s, "ttft": ttft_s, "tpot": tpot_s}, prompt_class, min_requests)
