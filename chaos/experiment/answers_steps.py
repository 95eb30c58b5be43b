"""The answers verdict's part in every recovery and breaker scenario: the load sends greedy, seeded
prompts from a fixed set (`LOAD_ANSWERS`), the steady state before the fault is held until it gave enough
answers to be golden and to measure their own disagreement, and the verdict compares every answer that
ended during and after the fault with them (chaos.verify.answers.answers_across_fault)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chaos.verify.answers import answers_across_fault, answers_of

if TYPE_CHECKING:
    from chaos.env import Environment
    from chaos.experiment.run import Run
    from chaos.load.records import RequestRecord
    from chaos.verify.verdict import Verdict

# prompts per class in the greedy load's fixed set: each is asked again after the fault at the load's rate
PROMPT_SET = 16
LOAD_ANSWERS: dict[str, Any] = {"answers": PROMPT_SET}  # start_load's override that turns the greedy load on
# steady answers held for before the fault: with none of them disagreeing, 460 (as many answers after it as
# before) down to 230 (far more after) let 2 % of those diverging stand out at 99 % (Fisher); fewer: not proven
GOLDEN_ANSWERS = 600
PHASE = "steady state: golden answers"


def golden_wait_s(env: Environment) -> float:
    """How long the steady state is held at most for its golden answers: 60 s x time_scale."""
    return max(1.0, 60.0 * env.time_scale)


def collect_golden(sc: Run, *, answers: int = GOLDEN_ANSWERS, timeout_s: float | None = None) -> int:
    """Hold the steady state until the load's records hold `answers` answers (or the wait is up); how many."""
    load = sc.load
    if load is None:
        return 0
    seen = [0]

    def enough() -> bool:
        seen[0] = len(answers_of(load.records()))
        return seen[0] >= answers

    with sc.phase(PHASE, answers=answers):
        sc.poll(enough, timeout=golden_wait_s(sc.env) if timeout_s is None else timeout_s, every=0.5)
    return seen[0]


def answers_judged(records: list[RequestRecord], t_fault: float) -> Verdict:
    """The answers verdict of a scenario whose fault took effect at `t_fault`."""
    return answers_across_fault(records, t_fault)


__all__ = ["GOLDEN_ANSWERS", "LOAD_ANSWERS", "PHASE", "PROMPT_SET", "answers_judged", "collect_golden", "golden_wait_s"]
