"""A scenario's time budget: how long each of its phases may run, and a watchdog on its clock.

    budget = Budget([PhaseBudget("recover", 330, "2 x slas.recovery_s 150 + margin"), ...])
    watchdog = Watchdog(budget, clock)     # the Method enters and leaves phases on it, checks it each tick

A phase that runs past its budget, or a scenario past the sum of them all, raises BudgetExceeded
naming the phase, its budget and where the figure came from. The watchdog fires once and is then
spent, so the reverts and the closing that follow it are never cut short themselves. It is checked
at every tick of the scenario's waits and when a phase ends: a phase blocked in a call that never
returns is the per-test ceiling's to end (chaos/pytest_plugin.py), set above the total.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from chaos.errors import ChaosError


class BudgetExceeded(ChaosError, AssertionError):
    """A scenario phase ran past its budget: the scenario fails, naming the phase (one line)."""

    def __init__(self, message: str, *, phase: str, budget_s: float, elapsed_s: float) -> None:
        super().__init__(message)
        self.phase, self.budget_s, self.elapsed_s = phase, budget_s, elapsed_s


@dataclass(frozen=True)
class PhaseBudget:
    """How long one phase may run (`seconds`) and where that figure comes from (`why`)."""

    phase: str
    seconds: float
    why: str


class Budget:
    """A scenario's phase budgets; the scenario as a whole gets their sum."""

    def __init__(self, phases: Iterable[PhaseBudget], *, name: str = "") -> None:
        self.name = name
        self.phases = list(phases)
        self._by_name = {p.phase: p for p in self.phases}

    @property
    def total(self) -> float:
        return sum(p.seconds for p in self.phases)

    def get(self, phase: str) -> PhaseBudget | None:
        """The budget of `phase`: its own, else that of the name before its first colon ("verify"
        for "verify: the system behaved"); None when the budget names neither."""
        return self._by_name.get(phase) or self._by_name.get(phase.split(":", 1)[0].strip())

    def describe(self) -> str:
        return f"{self.total:.0f} s: " + ", ".join(f"{p.phase} {p.seconds:.0f}" for p in self.phases)


def margin(seconds: float) -> float:
    """The slack a phase gets over the figure it is derived from: 10 %, at least 30 s (a busy
    machine's process start, a load generator's start-up, a slow scrape)."""
    return max(30.0, 0.1 * seconds)


def derived(phase: str, seconds: float, why: str) -> PhaseBudget:
    """A phase budget of `seconds` plus its margin; `why` names the figure it comes from."""
    return PhaseBudget(phase, round(seconds + margin(seconds), 1), f"{why} + margin")


class Watchdog:
    """Tracks the open phases of one scenario against a Budget on the scenario's own clock."""

    def __init__(self, budget: Budget, clock: Callable[[], float], *, t0: float | None = None) -> None:
        self.budget, self.clock = budget, clock
        self.t0 = clock() if t0 is None else t0
        self.open: list[tuple[str, float, PhaseBudget | None]] = []  # (phase, start, its own budget), outermost first
        self.spent = False  # fired once, or disarmed: never raises again

    def enter(self, phase: str, own: PhaseBudget | None = None) -> None:
        """A phase starts; `own`: the budget of a wait whose bound the step itself was given (the scenario's
        Budget does not know it, and a name like "steady state: golden answers" must not fall back to the
        budget of "steady state")."""
        self.open.append((phase, self.clock(), own))

    def leave(self, phase: str) -> None:
        for i in range(len(self.open) - 1, -1, -1):
            if self.open[i][0] == phase:
                del self.open[i]
                return

    def disarm(self) -> None:
        """No more checks: the scenario is closing (its reverts must run whatever the time)."""
        self.spent = True

    def check(self) -> None:
        """Raise BudgetExceeded (once) when an open phase or the whole scenario ran past its budget."""
        if self.spent:
            return
        now = self.clock()
        for phase, start, own in reversed(self.open):
            b = own or self.budget.get(phase)
            if b is not None and now - start > b.seconds:
                self._fire(f"phase {phase!r} ran {now - start:.1f} s, its budget {b.seconds:.1f} s ({b.why})",
                           phase, b.seconds, now - start)
        if self.budget.phases and now - self.t0 > self.budget.total:
            running = f"; phase {self.open[-1][0]!r} was running" if self.open else ""
            self._fire(f"the scenario ran {now - self.t0:.1f} s, its budget {self.budget.total:.1f} s "
                       f"(the sum of its phases' budgets){running}",
                       self.open[-1][0] if self.open else "(between phases)", self.budget.total, now - self.t0)

    def _fire(self, what: str, phase: str, budget_s: float, elapsed_s: float) -> None:
        self.spent = True
        raise BudgetExceeded(f"scenario budget: {what}", phase=phase, budget_s=budget_s, elapsed_s=elapsed_s)
