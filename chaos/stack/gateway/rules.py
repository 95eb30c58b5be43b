"""The breaker rules the gateway reads: any object with these attributes (the harness hands in an environment's
`breaker:` block, chaos.env.model.BreakerPolicy, whose schema holds the defaults and the validation)."""
from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol

# the answers an environment calls "busy: back off" unless it says otherwise (retry.overload_statuses: NVIDIA
# Dynamo sheds overload with 529); kept equal to chaos.env.model.RetryPolicy's default by a test
OVERLOAD_STATUSES = frozenset({429, 503, 529})


def breaker_failure(status: int, overload_statuses: Collection[int] = OVERLOAD_STATUSES) -> bool:
    """Whether an answer with this status counts as a failure in a pool's breaker window and for ejection.

    Busy counts, as down does: any 5xx, a 429, and every status the team's policy calls overload (Dynamo's
    529; a code below 500 too when listed). The breaker moves traffic off a pool its users get no answer
    from, and a pool that sheds load fails them as surely as a broken one (draining it is also what
    relieves it). Busy differs from down on the client's side: it backs off and retries the same service
    (chaos.verify.backoff's overload rule) instead of failing over."""
    return status >= 500 or status == 429 or status in overload_statuses


class BreakerRules(Protocol):
    """The two-tier breaker and anomaly thresholds, as the gateway uses them."""

    @property
    def degrade_error_rate(self) -> float: ...
    @property
    def degrade_latency_s(self) -> float: ...
    @property
    def rollback_error_rate(self) -> float: ...
    @property
    def oom_burst_count(self) -> int: ...
    @property
    def oom_burst_window_s(self) -> float: ...
    @property
    def leak_rate_per_hour(self) -> float: ...
    @property
    def leak_window_s(self) -> float: ...
    @property
    def leak_min_growth(self) -> float: ...
    @property
    def window_s(self) -> float: ...
    @property
    def min_calls(self) -> int: ...
    @property
    def open_wait_s(self) -> float: ...
    @property
    def half_open_calls(self) -> int: ...
    @property
    def canary_weight(self) -> float: ...
    @property
    def normalize_unicode(self) -> bool: ...


@dataclass
class DefaultRules:
    """The rules a gateway started from flags alone uses: an environment's `breaker:` defaults (kept equal to
    chaos.env.model.BreakerPolicy by tests/standins/gateway/test_gateway_entry.py)."""

    degrade_error_rate: float = 0.01
    degrade_latency_s: float = 2.0
    rollback_error_rate: float = 0.03
    oom_burst_count: int = 3
    oom_burst_window_s: float = 10.0
    leak_rate_per_hour: float = 0.05
    leak_window_s: float = 3600.0
    leak_min_growth: float = 0.02
    window_s: float = 10.0
    min_calls: int = 50
    open_wait_s: float = 5.0
    half_open_calls: int = 5
    canary_weight: float = 0.1
    normalize_unicode: bool = True
    hmac_key_env: str | None = None
