"""The retry schedule every reference client follows: min interval, exponential, jitter, cap."""
from __future__ import annotations

import random

from chaos.env.model import NON_RETRYABLE_STATUSES, RetryPolicy
from chaos.load.records import LOST_ANSWER_ERRORS


class Backoff:
    """Computes waits between attempts of one logical request from a RetryPolicy."""

    def __init__(self, policy: RetryPolicy, rng: random.Random | None = None) -> None:
        self.policy = policy
        self.rng = rng or random.Random()

    def wait_for(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt `attempt` (1-based) before the next one.

        Exponential from min_interval, capped, with jitter that only ever adds time (so the
        500 ms floor holds for every draw); a Retry-After is honoured but never below the floor.
        """
        p = self.policy
        base = min(p.max_interval_s, p.min_interval_s * p.multiplier ** (attempt - 1))
        wait = base * (1.0 + p.jitter * self.rng.random())
        wait = min(wait, max(p.max_interval_s, p.min_interval_s))
        if retry_after is not None:
            wait = max(wait, min(retry_after, p.max_interval_s * 4))
        return max(wait, p.min_interval_s)

    def should_retry(self, status: int | None, error: str | None, *, streamed: bool = False) -> bool:
        """True when the failure is worth another attempt: a retry status, an overload status, or a lost answer.

        A stream that already delivered a token is never retried: the user has seen part of an
        answer, and a fresh attempt would show it again (or a different one) from the start."""
        if streamed:
            return False
        if status is not None and status in NON_RETRYABLE_STATUSES:
            return False
        if status is not None and (status in self.policy.retry_statuses or status in self.policy.overload_statuses):
            return True  # an overload answer (busy: back off) is retried on the same schedule as any other
        return error in LOST_ANSWER_ERRORS

    def give_up(self, attempt: int, elapsed_s: float, next_wait_s: float = 0.0) -> bool:
        """True when no further attempt may be made (attempt count or deadline)."""
        return attempt >= self.policy.max_attempts or elapsed_s + next_wait_s > self.policy.deadline_s
