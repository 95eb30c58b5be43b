"""Locust load shapes: fixed, ramp and step (the arrival-rate schedule lives in pacing.py)."""
from __future__ import annotations

from locust import LoadTestShape

__all__ = ["FixedShape", "RampShape", "StepShape"]


class RampShape(LoadTestShape):
    """Users grow linearly from `start_users` to `end_users` over `duration_s`, then stop."""

    abstract = True
    start_users = 1
    end_users = 8
    duration_s = 30.0

    def tick(self) -> tuple[int, float] | None:
        t: float = self.get_run_time()  # type: ignore[no-untyped-call]  # untyped in locust
        if t >= self.duration_s:
            return None
        users = self.start_users + (self.end_users - self.start_users) * t / self.duration_s
        return max(1, round(users)), max(1.0, float(self.end_users))


class StepShape(LoadTestShape):
    """Adds `step_users` every `step_s` up to `max_users`; stops at `duration_s`."""

    abstract = True
    step_users = 2
    step_s = 5.0
    max_users = 8
    duration_s = 30.0

    def tick(self) -> tuple[int, float] | None:
        t: float = self.get_run_time()  # type: ignore[no-untyped-call]  # untyped in locust
        if t >= self.duration_s:
            return None
        users = min(self.max_users, self.step_users * (int(t // self.step_s) + 1))
        return users, float(max(users, 1))


class FixedShape(LoadTestShape):
    """A fixed number of users for `duration_s` (used so every shape ends on its own)."""

    abstract = True
    users = 8
    duration_s = 30.0

    def tick(self) -> tuple[int, float] | None:
        if self.get_run_time() >= self.duration_s:  # type: ignore[no-untyped-call]  # untyped in locust
            return None
        return self.users, float(self.users)
