"""The share of requests that failed: final requests (after the client's retries) or every attempt."""
from __future__ import annotations

from chaos.checks.base import MIN_REQUESTS, Bound, Window, failed, require
from chaos.load.records import RequestRecord


class _ErrorShare(Bound):
    def __init__(self, share: float, attempts: bool, prompt_class: str | None, min_requests: int) -> None:
        require(0 <= share <= 1, "share", "a share of requests in 0..1", share)
        require(min_requests >= 1, "min_requests", "at least 1", min_requests)
        self.limit, self.attempts, self.prompt_class, self.min_requests = share, attempts, prompt_class, min_requests
        self.name = ("attempt error rate" if attempts else "error rate") + (f" ({prompt_class})" if prompt_class else "")

    def value(self, done: list[RequestRecord], window: Window) -> float:
        return sum(1 for r in done if failed(r)) / len(done)

    def expected(self) -> str:
        return f"<= {self.limit:.2%}"

    def show(self, value: float) -> str:
        return f"{value:.2%}"


def error_share_below(share: float, *, attempts: bool = False, prompt_class: str | None = None,
                      min_requests: int = MIN_REQUESTS) -> Bound:
    """Share (0..1) of final requests that failed after the client's retries; of every attempt with `attempts`."""
    return _ErrorShare(share, attempts, prompt_class, min_requests)
