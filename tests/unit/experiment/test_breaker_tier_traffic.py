"""A breaker tier is skipped as not proven on the traffic the load really sent once the canary's window is full,
never on the warm-up's rate (a fresh real-vLLM replica's first seconds are a third of its steady rate)."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from chaos.env import load
from chaos.experiment import breaker_tier as bt
from chaos.verify.breaker_sizes import drain_unseen, sizes, why_not, window_target


class SlowWarmUpStack:
    def __init__(self) -> None:
        self.env = load("local", environ={})

    def capacity_rps(self) -> float | None:
        return 0.1  # far too slow for any tier, were it believed

    def targets_in(self, pool: str) -> list[str]:
        return ["replica-c"]


def _steps(name: str, *, calls: int, sends_per_s: float, kind: str = "reference") -> Any:
    env = load("local", environ={})
    steps: Any = object.__new__(bt.BreakerSteps)
    steps.policy, steps.kind = env.breaker, kind
    steps.size = sizes(env.breaker)[name]
    span = env.breaker.window_s
    n = max(2, int(sends_per_s * span) + 1)
    records = [SimpleNamespace(t_send=1_000.0 + i * span / (n - 1)) for i in range(n)]
    steps.sc = SimpleNamespace(load=SimpleNamespace(records=lambda: records))
    steps._canary_window_full = lambda target: calls
    return steps


def test_the_warm_up_rate_skips_nothing() -> None:
    exp = bt.breaker_tier(SlowWarmUpStack(), None, None, "errors-degrade", users=8,  # type: ignore[arg-type]
                          duration_s=60.0, faults=lambda canaries, size: [])
    assert exp.name == "breaker-errors-degrade"


def test_too_few_calls_in_the_full_window_is_not_proven_naming_them() -> None:
    p = load("local", environ={}).breaker
    size = sizes(p)["errors-rollback"]
    short = p.min_calls - 1
    assert why_not(p, size, short) is not None
    with pytest.raises(pytest.skip.Exception, match=rf"not proven: .*{short}.*counted in the canary's window"):
        _steps("errors-rollback", calls=short, sends_per_s=100.0).fill_canary_window()
    _steps("errors-rollback", calls=window_target(p, size), sends_per_s=100.0).fill_canary_window()  # enough: goes on


def test_a_degrade_s_drain_is_judged_at_the_rate_the_load_sent() -> None:
    p = load("local", environ={}).breaker
    enough = window_target(p, sizes(p)["errors-degrade"])
    slow, fast = 0.5, 500.0
    assert drain_unseen(p, slow) is not None and drain_unseen(p, fast) is None
    with pytest.raises(pytest.skip.Exception, match=r"req/s the load sent while the canary's window filled"):
        _steps("errors-degrade", calls=enough, sends_per_s=slow).fill_canary_window()
    _steps("errors-degrade", calls=enough, sends_per_s=fast).fill_canary_window()
    _steps("errors-degrade", calls=enough, sends_per_s=slow, kind="nginx").fill_canary_window()  # its own ban


def test_the_window_s_fill_waits_under_its_own_budget_of_two_windows() -> None:
    from contextlib import contextmanager

    from chaos.experiment.budget import Budget
    from chaos.experiment.suite_budgets import SUITES

    env = load("local-vllm", environ={})
    entered: list[str] = []

    @contextmanager
    def phase(name: str, **detail: Any) -> Any:
        entered.append(name)
        yield

    steps: Any = object.__new__(bt.BreakerSteps)
    steps.policy, steps.admin, steps.canaries = env.breaker, False, ["replica-c"]
    steps.sc = SimpleNamespace(phase=phase, wait_until=lambda cond, timeout, every: True)
    steps._canary_window_full(120)
    budget = Budget(SUITES["breaker"](env)).get(entered[0])
    assert budget is not None and budget.seconds >= 2 * env.breaker.window_s, (entered, budget)


def test_the_steady_state_before_the_fill_waits_under_a_budget_of_half_a_window() -> None:
    from chaos.experiment.budget import Budget
    from chaos.experiment.suite_budgets import SUITES, breaker_steady_s

    for name in ("local", "local-vllm"):
        env = load(name, environ={})
        budget = Budget(SUITES["breaker"](env))
        steady = budget.get("steady state")
        assert steady is not None and steady.seconds >= breaker_steady_s(env.breaker) + 30.0, (name, steady)  # + margin
        assert [p.phase for p in budget.phases].count("steady state") == 1  # replaced, not counted twice
    wide = load("local-vllm", environ={}).breaker.model_copy(update={"window_s": 120.0})
    assert breaker_steady_s(wide) == 60.0
