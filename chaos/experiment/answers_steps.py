"""The answers verdict's part in every recovery and breaker scenario: the load sends greedy, seeded
prompts from a fixed set (`LOAD_ANSWERS`), the steady state before the fault is held until it gave enough
answers to be golden and to measure their own disagreement (and a recovery's steady state after it until
as many came after the fault), and the verdict compares every answer that ended during and after the fault
with them (chaos.verify.answers.answers_across_fault). Both waits are bounded (`golden_wait_s`): a slow
backend gets a verdict that says it had too few answers, never a longer scenario than that."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chaos.experiment.budget import derived
from chaos.verify.answers import answers_of

if TYPE_CHECKING:
    from chaos.env import Environment
    from chaos.experiment.run import Run

# prompts per class in the greedy load's fixed set: each is asked again after the fault at the load's rate
PROMPT_SET = 16
LOAD_ANSWERS: dict[str, Any] = {"answers": PROMPT_SET}  # start_load's override that turns the greedy load on
# steady answers held for before the fault: with none of them disagreeing, 460 (as many answers after it as
# before) down to 230 (far more after) let 2 % of those diverging stand out at 99 % (Fisher); fewer: not proven
GOLDEN_ANSWERS = 600
PHASE = "steady state: golden answers"
PHASE_AFTER = "steady state: answers after the fault"


def golden_wait_s(env: Environment) -> float:
    """How long the steady state is held at most for its golden answers: 60 s x time_scale."""
    return max(1.0, 60.0 * env.time_scale)


def collect_golden(sc: Run, *, answers: int = GOLDEN_ANSWERS, timeout_s: float | None = None) -> int:
    """Hold the steady state until the load's records hold `answers` answers (or the wait is up); how many."""
    return _hold(sc, PHASE, None, answers, timeout_s)


def collect_after(sc: Run, t_fault: float, *, answers: int = GOLDEN_ANSWERS, timeout_s: float | None = None) -> int:
    """Keep the load running until `answers` answers ended after `t_fault` (or the wait is up); how many."""
    return _hold(sc, PHASE_AFTER, t_fault, answers, timeout_s)


def _hold(sc: Run, phase: str, since: float | None, answers: int, timeout_s: float | None) -> int:
    load = sc.load
    if load is None:
        return 0
    seen = [0]

    def enough() -> bool:
        recs = load.records()
        if since is not None:
            recs = [r for r in recs if r.t_end >= since]
        seen[0] = len(answers_of(recs))
        return seen[0] >= answers

    wait = golden_wait_s(sc.env) if timeout_s is None else timeout_s
    # the phase's budget is its own bounded wait, whatever suite it runs in (a team's own, too)
    with sc.phase(phase, budget=derived(phase, wait, "its wait for answers"), answers=answers):
        sc.poll(enough, timeout=wait, every=0.5)
    return seen[0]


__all__ = ["GOLDEN_ANSWERS", "LOAD_ANSWERS", "PHASE", "PHASE_AFTER", "PROMPT_SET", "collect_after",
           "collect_golden", "golden_wait_s"]
