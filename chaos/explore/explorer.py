"""`chaos explore` and `chaos replay`: random schedules run one after another under the environment's
load, each judged by heal-and-check (check.py); a failing schedule is written as a file that `chaos
replay` runs again. The schedules of a run come from its seed alone, so two runs with the same seed
try the same schedules (the report lists their hashes)."""
from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.experiment import events as ev
from chaos.experiment.handle import RunHandle
from chaos.experiment.method import Method, StopAsked
from chaos.experiment.runner import Experiment, ExperimentRun, execute
from chaos.experiment.stop import StopSwitch
from chaos.explore.check import CLOSED, FORCED_OPEN, breaker_verdict, history_verdicts, served_again
from chaos.explore.guide import Guide, moves_of
from chaos.explore.run import ScheduleRun, walk
from chaos.explore.schedule import Schedule, ScheduledFault, generate
from chaos.explore.shrink import shrink
from chaos.verify.breaker import degrade_recovery_s
from chaos.verify.verdict import Verdict

STEADY_S = 3.0   # load before the first fault
DRAIN_S = 5.0    # after the heal: the clients' last retries land before the history is judged
SHRINK_CONFIRM = 2  # a smaller schedule is taken when it fails this many replays in a row (shrink.py)


@dataclass
class Outcome:
    schedule: Schedule
    verdicts: list[Verdict]
    errors: list[str]
    file: Path | None = None
    shrunk_from: Schedule | None = None
    shrink_runs: int = 0
    origin: str = "seed"
    moves: list[tuple[str, float]] = field(default_factory=list)  # the gateway's breaker moves, s into the faults

    @property
    def ok(self) -> bool:
        return all(v.ok for v in self.verdicts)

    def _first(self) -> tuple[Verdict, Any] | None:
        return next(((v, r) for v in self.verdicts for r in v.failures), None)

    def broken(self) -> str | None:
        """The first failing row, in one line (what the schedule breaks)."""
        first = self._first()
        return None if first is None else f"{first[0].name}: {first[1].line()}"

    def broken_check(self) -> str | None:
        """Which check failed, without its measured value: a shrunk schedule must break the same one."""
        first = self._first()
        return None if first is None else f"{first[0].name}: {first[1].check}"


@dataclass
class Explorer:
    """One exploration against a running stack (`stack` supervises the targets a restart needs)."""

    env: Any
    stack: Any
    out_dir: Path
    bus: ev.EventBus
    stop: StopSwitch
    make_fault: Callable[[ScheduledFault], Any]
    start_load: Callable[[Path, float, int], Any]
    probe: Callable[[str], bool]
    server_log: Callable[[list[Any]], Any] = lambda records: None  # the replica side over the records' window
    # the gateway's breakers, where it shows them (GET /admin/state) and takes an operator reset
    gateway_state: Callable[[], dict[str, Any]] | None = None
    gateway_reset: Callable[[], Any] | None = None
    outcomes: list[Outcome] = field(default_factory=list)
    # the schedules' clock and wait (a test runs them on a virtual clock: sub-second allowances judged in
    # real time failed on a busy machine, the harness's own wake-up counted against the gateway)
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep

    def urls(self) -> dict[str, str]:
        out = {"api": self.env.endpoints.api}
        out.update({t.name: f"http://{t.host}:{t.port}" for t in self.env.targets})
        return out

    def run_one(self, schedule: Schedule, seed: int = 0, *, keep: bool = True) -> Outcome:
        """One schedule through the one runner; what ended it early (a stop, an error) is raised."""
        handle = ScheduleRunHandle(self, schedule, seed)
        execute(Experiment(handle.name, steps=handle.steps), handle, reraise=True)
        out = Outcome(schedule, handle.verdicts, handle.errors, moves=handle.moves)
        if keep:
            if not out.ok:
                out.file = schedule.model_copy(update={"breaks": out.broken()}).write(self.out_dir / "failures")
            self.outcomes.append(out)
        return out

    def reset_breakers(self, m: Method, why: str) -> None:
        """The operator's reset of the gateway's breakers, where it has one (a rollback stays until then)."""
        if self.gateway_reset is not None:
            self.gateway_reset()
            m.publish(ev.Noted, what=f"operator reset of the gateway's breakers: {why}")

    def breakers_healed(self, m: Method, t_healed: float) -> dict[str, float | None]:
        """Seconds from the heal (every fault reverted and every replica serving again) until each pool
        not rolled back is closed (None: not within the degrade allowance); the load goes on meanwhile,
        so that half-open probes have traffic."""
        assert self.gateway_state is not None
        limit = degrade_recovery_s(self.env.breaker)
        # polled at a tenth of the allowance (0.05-0.5 s): at a fixed 0.5 s a close was seen up to 0.5 s late,
        # most of a 0.6 s allowance, and a busy machine's late wake-up failed a breaker that closed in time
        every = min(0.5, max(0.05, limit / 10))
        took: dict[str, float | None] = {}
        while True:
            pools = self.gateway_state().get("pools", {})
            open_now = [n for n, p in pools.items() if p.get("state") not in (CLOSED, FORCED_OPEN)]
            for n, p in pools.items():
                if p.get("state") == CLOSED:
                    took.setdefault(n, m.clock() - t_healed)
                else:  # tripped again: it has not healed yet
                    took.pop(n, None)
            if not open_now or m.clock() - t_healed > limit:
                break
            m.wait(every)
        return {n: took.get(n) for n, p in pools.items() if p.get("state") != FORCED_OPEN}

    def shrink(self, out: Outcome, *, max_runs: int, deadline: float, clock: Callable[[], float],
               say: Callable[[str], None]) -> Outcome:
        """Replace a failing outcome's file with the smallest schedule found that breaks the same check."""
        check = out.broken_check()

        def still_fails(candidate: Schedule) -> bool:
            if clock() + self.per_run(candidate.horizon_s) > deadline:
                return False  # no time left for this replay: keep what we have
            return self.run_one(candidate, keep=False).broken_check() == check

        shrunk = shrink(out.schedule, still_fails, max_runs=max_runs, confirm=SHRINK_CONFIRM)
        for step in shrunk.steps:
            say(f"    shrunk: {step}")
        if shrunk.schedule != out.schedule:
            if out.file is not None:
                out.file.unlink(missing_ok=True)
            out.shrunk_from, out.schedule = out.schedule, shrunk.schedule
            out.file = shrunk.schedule.model_copy(update={"breaks": out.broken()}).write(self.out_dir / "failures")
        out.shrink_runs = shrunk.runs
        return out

    def per_run(self, horizon_s: float) -> float:
        """The most one schedule may take: its load runs this long (and is stopped when it is judged)."""
        heal = degrade_recovery_s(self.env.breaker) if self.gateway_state is not None else 0.0
        return float(horizon_s + self.env.slas.recovery_s + STEADY_S + DRAIN_S + heal + 20)

    def explore(self, seed: int, budget_s: float, *, max_faults: int, horizon_s: float, allow_destructive: bool,
                shrink_runs: int = 12, say: Callable[[str], None] = print,
                clock: Callable[[], float] = time.monotonic) -> list[Outcome]:
        """Schedules drawn from `seed` until the budget is spent (one that would not fit is not started);
        a failing one is shrunk (at most `shrink_runs` replays, within the budget)."""
        rng = random.Random(seed)
        guide = Guide(self.env, seed, allow_destructive) if self.gateway_state is not None else None
        deadline = clock() + budget_s
        while clock() + self.per_run(horizon_s) <= deadline:
            # every other run follows a lead (guide.py) where there is one; the seeded ones keep their order
            lead = guide.follow_up() if guide is not None and len(self.outcomes) % 2 == 1 else None
            if lead is not None:
                schedule, origin = lead
            else:
                schedule, origin = generate(self.env, rng.randrange(2**31), max_faults=max_faults, horizon_s=horizon_s,
                                            allow_destructive=allow_destructive), "seed"
            try:
                out = self.run_one(schedule, seed=len(self.outcomes))
            except StopAsked:
                say("stopped: every fault in place was reverted")
                break
            out.origin = origin
            new = guide.learn(schedule, out.moves) if guide is not None else []
            failed = sum(1 for o in self.outcomes if not o.ok)
            say(f"[{len(self.outcomes)}] {schedule.key()} ({len(schedule.faults)} faults, {origin}): "
                f"{'ok' if out.ok else 'FAILED ' + str(out.broken())}; {failed} failing so far, "
                f"{max(0.0, deadline - clock()):.0f} s left" + (f"; new: {', '.join(new)}" if new else ""))
            if not out.ok and shrink_runs > 0:
                try:
                    self.shrink(out, max_runs=shrink_runs, deadline=deadline, clock=clock, say=say)
                except StopAsked:
                    say("stopped while shrinking: every fault in place was reverted")
                    break
        self.reset_breakers(Method("exploration", bus=self.bus, stop=self.stop, clock=self.clock, sleep=self.sleep),
                            "the exploration leaves no rollback behind")
        self.write_report(seed)
        return self.outcomes

    def write_report(self, seed: int | None) -> Path:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / "explore.json"
        path.write_text(json.dumps({"seed": seed, "environment": self.env.name, "schedules": [
            {"hash": o.schedule.key(), "origin": o.origin, "moves": [m for m, _ in o.moves],
             "faults": [f.describe() for f in o.schedule.faults], "ok": o.ok,
             "breaks": o.broken(), "errors": o.errors, "file": str(o.file) if o.file else None,
             "shrunk_from": o.shrunk_from.key() if o.shrunk_from else None, "shrink_runs": o.shrink_runs}
            for o in self.outcomes]}, indent=1), encoding="utf-8")
        return path


class ScheduleRunHandle(RunHandle):
    """The run handle of one schedule: its load starts with every breaker closed, its steps walk the faults
    and check the heal, and its way out stops the load and judges the history (check.py) whatever happened."""

    def __init__(self, explorer: Explorer, schedule: Schedule, seed: int) -> None:
        x = explorer
        name = f"schedule {schedule.key()}"
        super().__init__(name, Method(name, bus=x.bus, stop=x.stop, clock=x.clock, sleep=x.sleep))
        self.x, self.schedule, self.seed = explorer, schedule, seed
        self.verdicts: list[Verdict] = []
        self.errors: list[str] = []
        self.moves: list[tuple[str, float]] = []
        self.healed: dict[str, float | None] = {}
        self.walked: ScheduleRun | None = None
        self.t_run = 0.0

    def start(self, plan: str) -> None:
        """The schedule's faults in words; every breaker closed, then the load."""
        self.publish(ev.ExperimentStarted, plan="; ".join(f.describe() for f in self.schedule.faults))
        self.x.reset_breakers(self.method, "the schedule starts with every breaker closed")
        self.t_run = self.clock()
        self.load = self.x.start_load(self.x.out_dir / self.schedule.key(), self.x.per_run(self.schedule.horizon_s),
                                      self.seed)

    def steps(self, run: RunHandle) -> None:
        """Steady state, the schedule's faults, then every replica must serve again and the breakers heal."""
        m, x = self.method, self.x
        with m.phase("steady state"):
            m.wait(STEADY_S)
        with m.phase("faults"):
            self.walked = walk(self.schedule, m, x.make_fault)
        self.errors = self.walked.errors
        with m.phase("heal and check"):
            assert self.walked.t_healed is not None
            served = served_again(x.env, x.urls(), self.walked.t_healed, probe=x.probe, clock=m.clock, sleep=m.wait)
            self.verdicts.append(served)
            m.wait(DRAIN_S)
        if x.gateway_state is not None:
            with m.phase("breakers heal"):  # timed from when every replica served again
                self.healed = x.breakers_healed(m, served.data.get("t_served") or self.walked.t_healed)

    def finish(self, run: ExperimentRun) -> None:
        """Whatever ended the steps: stop the load and judge the history (once the heal was checked)."""
        x, status = self.x, "ERROR"
        moves: list[dict[str, Any]] = []
        t_end = self.clock()
        records = list(self.load.stop().records)
        if self.verdicts:
            self.verdicts += history_verdicts(x.env, records, x.server_log(records))
            if x.gateway_state is not None:
                moves = [t for t in x.gateway_state().get("transitions", []) if float(t["t"]) >= self.t_run]
                self.verdicts.append(breaker_verdict(x.env, records, moves, t_end=t_end, healed_after_s=self.healed))
            for v in self.verdicts:
                self.publish(ev.VerdictReached, name=v.name, ok=v.ok, failures=tuple(r.line() for r in v.failures),
                             rows=tuple(r.line() for r in v.rows), unproven=tuple(r.line() for r in v.unproven))
            status = "PASSED" if all(v.ok for v in self.verdicts) else "FAILED"
        self.publish(ev.ExperimentEnded, status=status, reason="; ".join(self.errors))
        self.moves = moves_of(moves, self.walked.t_start) if self.walked is not None else []
        run.t_end = t_end
