"""The resilience capacity curve (`chaos capacity`): the highest offered load at which the recovery SLA
still holds under a fault.

Throughput benchmarks say how much load a stack serves when nothing breaks; a chaos run says whether
it recovers at the load someone picked. Neither says how much load it can carry and still recover:
the margin a team actually runs on when a replica restarts at peak. The search answers that.

At each offered rate (Poisson arrivals, the environment's prompt mix) a trial is one Experiment: the
load, a steady state, the fault, its revert, and then `until=recovered(within=slas.recovery_s)` with
the hypothesis "error rate <= the error budget, and each class's E2E P99 within its SLA" over a
window that begins after the revert. A rate
holds when every one of `trials` trials recovers in time; a no-fault control run at the same rate
gives the goodput and P99 the fault is compared with. Rates rise geometrically (x `step`) from
`min_rate` until one fails or `max_rate` is reached, then the gap between the last rate that held
and the first that failed is bisected `refine` times. The search stops at `budget_s`, and says so.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chaos.checks import MIN_REQUESTS, Hypothesis, error_share_below, p99_below_s
from chaos.experiment.runner import Experiment, ExperimentRun, Status, recovered
from chaos.load.stats import summarize


@dataclass
class Point:
    """One offered rate: its trials under the fault and its no-fault control."""

    rate: float
    trials: list[ExperimentRun] = field(default_factory=list)
    control: ExperimentRun | None = None

    @property
    def held(self) -> bool:
        return bool(self.trials) and all(t.status is Status.PASSED for t in self.trials)

    def recovery_s(self) -> float | None:
        """The slowest trial's time from the revert to the hypothesis holding again (None: never)."""
        times = [recovery_time(t) for t in self.trials]
        return None if not times or any(x is None for x in times) else max(x for x in times if x is not None)

    def goodput(self, run: ExperimentRun | None, slas: Any) -> float | None:
        if run is None or not run.records:
            return None
        return summarize(run.records, slas.latency).goodput_per_s

    def p99(self, run: ExperimentRun | None) -> float | None:
        if run is None:
            return None
        st = summarize(run.records)
        return st.all.get("e2e", 99) if st.classes else None


def recovery_time(run: ExperimentRun) -> float | None:
    """Seconds from the revert to the first 'after' reading of the hypothesis that held."""
    if run.t_revert is None:
        return None
    held = [r.window[1] for when, r in run.readings if when == "after" and r.ok and r.window]
    return round(min(held) - run.t_revert, 3) if held and run.status is Status.PASSED else None


@dataclass
class Search:
    """The search's settings (see the module docstring)."""

    min_rate: float = 2.0
    max_rate: float = 64.0
    step: float = 2.0
    refine: int = 2
    trials: int = 2
    budget_s: float = 840.0
    points: list[Point] = field(default_factory=list)
    ran_out: bool = False

    def capacity(self) -> float | None:
        """The highest rate that held, below the lowest that failed (None: not even min_rate held)."""
        failed = [p.rate for p in self.points if not p.held]
        ceiling = min(failed) if failed else float("inf")
        held = [p.rate for p in self.points if p.held and p.rate < ceiling]
        return max(held) if held else None

    def trials_run(self) -> int:
        return sum(len(p.trials) + (p.control is not None) for p in self.points)

    def run(self, trial: Callable[[float, bool], ExperimentRun], *, clock: Callable[[], float] = time.monotonic,
            say: Callable[[str], None] = lambda line: None) -> Search:
        """`trial(rate, with_fault)` runs one experiment; rates are tried as the docstring says."""
        deadline = clock() + self.budget_s

        def measure(rate: float) -> Point | None:
            point = Point(rate)
            for i in range(self.trials):
                if clock() >= deadline:
                    self.ran_out = True
                    return None
                point.trials.append(trial(rate, True))
                say(f"rate {rate:g}/s trial {i + 1}: {point.trials[-1].status.value} "
                    f"(recovery {recovery_time(point.trials[-1])} s)")
                if not point.held:
                    break  # one failed trial fails the rate: no need for the rest
            if clock() < deadline:
                point.control = trial(rate, False)
            self.points.append(point)
            return point

        rate, good, bad = self.min_rate, None, None
        while rate <= self.max_rate * (1 + 1e-9):
            p = measure(rate)
            if p is None:
                return self
            if not p.held:
                bad = rate
                break
            good = rate
            rate *= self.step
        if good is None or bad is None:
            return self
        for _ in range(self.refine):
            mid = round((good + bad) / 2, 2)
            p = measure(mid)
            if p is None:
                return self
            good, bad = (mid, bad) if p.held else (good, mid)
        return self


def recovered_hypothesis(slas: Any) -> Hypothesis:
    """What `steady_state_s` calls recovered: the error rate within the error budget and each prompt
    class's E2E P99 (a failure counted as a miss) within its SLA. A stack saturated by the offered load
    answers without errors but too late: that is not recovered either."""
    h = Hypothesis([error_share_below(slas.error_budget)])
    for cls, sla in sorted(slas.latency.items()):
        h = h & p99_below_s(sla.e2e_p99_s, prompt_class=cls)
    return h


def trial_experiment(env: Any, rate: float, *, fault: Any, load: Callable[[float, float], Any], hold_s: float,
                     window_s: float = 5.0) -> Experiment:
    """One trial at `rate`: the fault (None: the control) under Poisson load, judged on recovery."""
    recovery = env.slas.recovery_s
    mix = {c: w for c, w in env.load.mix.items() if w > 0 and c in env.slas.latency} or {"all": 1.0}
    rarest = min(mix.values()) / sum(env.load.mix.values())
    # a window long enough for the rarest class to reach a P99 probe's minimum, with room to spare
    window = max(window_s, 20.0 / rate, 1.5 * MIN_REQUESTS / (rate * rarest))
    steady = window + 5.0                # the load's processes take a few seconds to send their first request
    seconds = steady + hold_s + recovery + window + 10  # steady, hold, the longest allowed recovery, a margin
    return Experiment(f"rate {rate:g}/s" + ("" if fault is not None else " (no fault)"), fault=fault, hold_s=hold_s,
                      hypothesis=recovered_hypothesis(env.slas), window_s=window, steady_s=steady,
                      until=recovered(within=recovery), load=lambda: load(rate, seconds), check_every_s=0.5)


def table_rows(search: Search, slas: Any) -> list[list[Any]]:
    """[rate, trials held, recovery s, goodput/s with the fault, without, e2e P99 with, without] per rate."""
    rows = []
    for p in sorted(search.points, key=lambda p: p.rate):
        faulted = p.trials[-1] if p.trials else None
        rows.append([p.rate, f"{sum(t.status is Status.PASSED for t in p.trials)}/{len(p.trials)}", p.recovery_s(),
                     p.goodput(faulted, slas), p.goodput(p.control, slas), p.p99(faulted), p.p99(p.control)])
    return rows


def plot(search: Search, slas: Any, *, title: str, path: Any) -> bytes:
    """Recovery time and goodput against offered load, with and without the fault; the capacity marked."""
    from matplotlib.figure import Figure

    from chaos.report.timeline import figure_png  # also puts matplotlib on its Agg backend

    rows = table_rows(search, slas)
    rates = [r[0] for r in rows]
    fig = Figure(figsize=(10, 7), layout="constrained")
    ax_rec, ax_good = fig.subplots(2, 1, sharex=True)
    fig.suptitle(title)
    ax_rec.plot(rates, [r[2] if r[2] is not None else float("nan") for r in rows], "o-", color="#d62728",
                label="recovery time under the fault (s)")
    for r in rows:
        if r[2] is None:
            ax_rec.plot([r[0]], [slas.recovery_s], "x", color="#d62728", ms=10)
    ax_rec.axhline(slas.recovery_s, color="0.4", ls="--", label=f"recovery SLA {slas.recovery_s:g} s")
    ax_rec.set_ylabel("seconds")
    ax_good.plot(rates, [r[3] if r[3] is not None else float("nan") for r in rows], "o-", label="goodput, with the fault")
    ax_good.plot(rates, [r[4] if r[4] is not None else float("nan") for r in rows], "s--", label="goodput, no fault")
    ax_good.set_ylabel("goodput (requests/s)")
    ax_good.set_xlabel("offered load (requests/s, Poisson; log scale)")
    if len(rates) > 1:
        ax_good.set_xscale("log", base=2)
    cap = search.capacity()
    for ax in (ax_rec, ax_good):
        if cap is not None:
            ax.axvline(cap, color="#2ca02c", lw=1.5, label=f"capacity {cap:g}/s")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    return figure_png(fig, path)
