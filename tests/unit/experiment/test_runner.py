"""The experiment runner on a fake clock: phases, refusal, abort, rollback on error, on interrupt, on a
failed hypothesis, the stop file; every way out reverts the fault."""
from __future__ import annotations

import json

import pytest

from chaos.checks import error_share_below, p99_below_s
from chaos.errors import FaultNotEffective
from chaos.experiment import (
    AbortLimits,
    EventBus,
    Experiment,
    Journal,
    Status,
    StopSwitch,
    recovered,
    request_stop,
)
from chaos.experiment import events as ev
from chaos.load.records import RequestRecord


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0
        self.hooks: list = []  # (at, fn): run once when the clock passes `at`

    def __call__(self) -> float:
        return self.now

    def sleep(self, dt: float) -> None:
        self.now += dt
        for at, fn in list(self.hooks):
            if self.now >= at:
                self.hooks.remove((at, fn))
                fn()


class System:
    """A served system on the fake clock: 20 requests a second, failing at `error_rate` while broken."""

    def __init__(self, clock: Clock, healthy_error_rate: float = 0.0) -> None:
        self.clock, self.error_rate, self.healthy = clock, healthy_error_rate, healthy_error_rate
        self.recs: list[RequestRecord] = []
        self.made_until = clock.now
        self.n = 0

    def records(self) -> list[RequestRecord]:
        while self.made_until + 0.05 <= self.clock.now:
            self.made_until += 0.05
            self.n += 1
            bad = (self.n % 100) < self.error_rate * 100
            self.recs.append(RequestRecord(f"r{self.n}", 1, self.made_until - 0.2, e2e=0.2,
                                           error="http" if bad else None, status=500 if bad else 200,
                                           outcome="failed" if bad else "succeeded"))
        return list(self.recs)


class Fault:
    def __init__(self, system: System, broken: float = 0.8, *, fail_inject: bool = False, heals: bool = True,
                 lapses: bool = False) -> None:
        self.system, self.broken, self.fail_inject, self.heals, self.lapses = system, broken, fail_inject, heals, lapses
        self.log: list[str] = []

    def inject(self):
        self.log.append("inject")
        self.system.error_rate = self.broken
        if self.fail_inject:
            raise RuntimeError("the second replica's proxy did not answer")

    def revert(self, check: bool = True):
        self.log.append("revert" if check else "revert (no check)")
        if check and self.lapses:
            self.system.error_rate = self.system.healthy
            raise FaultNotEffective("probe shows no effect", fault="unit")
        if self.heals:
            self.system.error_rate = self.system.healthy

    def __repr__(self) -> str:
        return f"fault({self.broken:.0%})"


def _run(exp: Experiment, clock: Clock, system: System, stop: StopSwitch | None = None, bus: EventBus | None = None):
    bus = bus or EventBus()
    return exp.run(bus=bus, clock=clock, sleep=clock.sleep, stop=stop, records=system.records), bus


def _phases(bus: EventBus) -> list[str]:
    return [e.phase for e in bus.events if isinstance(e, ev.PhaseStarted)]


def test_a_passing_experiment_runs_its_phases_in_order_and_reverts(tmp_path):
    clock = Clock()
    system = System(clock)
    fault = Fault(system, broken=0.2)
    journal = Journal(tmp_path, title="unit game day")
    bus = EventBus()
    bus.subscribe(journal)
    exp = Experiment("errors", fault=fault, hold_s=20, hypothesis=error_share_below(0.05) & p99_below_s(1.0),
                     until=recovered(within=30), abort=AbortLimits(error_rate=0.5))
    run, _ = _run(exp, clock, system, bus=bus)
    assert run.status is Status.PASSED and run.exit_code == 0, run.reason
    assert fault.log == ["inject", "revert"]
    assert _phases(bus) == ["steady state", "inject", "hold", "revert", "recover", "verify"]
    assert run.t_revert - run.t_inject == pytest.approx(20, abs=0.2)
    during = [r for when, r in run.readings if when == "during" and r.probe == "error rate"]
    assert during and not any(r.ok for r in during[2:]), "the fault was seen during the hold"
    after = [e for e in bus.events if isinstance(e, ev.HypothesisChecked) and e.when == "after"]
    assert after[-1].ok and after[-1].t - run.t_revert <= 30
    data = json.loads((tmp_path / "journal.json").read_text())
    assert [e["event"] for e in data["events"]][:2] == ["ExperimentStarted", "PhaseStarted"]
    assert data["events"][-1] == {**data["events"][-1], "event": "ExperimentEnded", "status": "PASSED"}
    md = (tmp_path / "summary.md").read_text()
    assert "| errors | PASSED |" in md and "injected fault(20%)" in md and "What deviated" in md


def test_a_sick_system_is_refused_and_nothing_is_injected():
    clock = Clock()
    system = System(clock, healthy_error_rate=0.3)
    fault = Fault(system)
    run, bus = _run(Experiment("refused", fault=fault, hypothesis=error_share_below(0.05)), clock, system)
    assert run.status is Status.REFUSED and run.exit_code == 4
    assert fault.log == [] and "expected <= 5.00%, got 30.00% over window 10.0 s" in run.reason
    assert not any(isinstance(e, ev.FaultInjected) for e in bus.events)


def test_the_abort_guard_reverts_at_once_and_ends_aborted():
    clock = Clock()
    system = System(clock)
    fault = Fault(system, broken=0.8)
    exp = Experiment("too hot", fault=fault, hold_s=120, hypothesis=error_share_below(0.05),
                     abort=AbortLimits(error_rate=0.5, window_s=5), until=recovered(within=30))
    run, bus = _run(exp, clock, system)
    assert run.status is Status.ABORTED and run.exit_code == 3
    assert "over safety.abort.error_rate 50%" in run.reason
    assert fault.log == ["inject", "revert (no check)"], "an abort reverts at once, without proving the fault first"
    assert run.t_revert - run.t_inject < 6, "reverted within the guard's window, not at the hold's end"
    kinds = [e.kind for e in bus.events]
    assert kinds.index("Aborted") < kinds.index("FaultReverted") < kinds.index("ExperimentEnded")
    assert "recover" not in _phases(bus) and "verify" not in _phases(bus)


def test_a_fault_older_than_the_limit_is_aborted():
    clock = Clock()
    system = System(clock)
    exp = Experiment("long", fault=Fault(system, broken=0.1), hold_s=600, abort=AbortLimits(max_fault_duration_s=30))
    run, _ = _run(exp, clock, system)
    assert run.status is Status.ABORTED and "max_fault_duration_s 30 s" in run.reason
    assert run.t_revert - run.t_inject < 32


def test_a_fault_that_fails_halfway_is_reverted_and_the_run_is_an_error():
    clock = Clock()
    system = System(clock)
    fault = Fault(system, fail_inject=True)
    run, bus = _run(Experiment("half", fault=fault, hold_s=10), clock, system)
    assert run.status is Status.ERROR and run.exit_code == 5 and "did not answer" in run.reason
    assert fault.log == ["inject", "revert (no check)"] and system.error_rate == 0.0


def test_ctrl_c_during_the_hold_reverts_and_ends_stopped():
    clock = Clock()
    system = System(clock)
    fault = Fault(system)

    def interrupt():
        raise KeyboardInterrupt

    clock.hooks.append((clock.now + 15, interrupt))
    run, bus = _run(Experiment("interrupted", fault=fault, hold_s=60), clock, system)
    assert run.status is Status.STOPPED and run.exit_code == 2 and run.reason == "stopped by Ctrl-C"
    assert fault.log == ["inject", "revert (no check)"]
    stopped = next(e for e in bus.events if isinstance(e, ev.Stopped))
    assert stopped.by == "SIGINT"


def test_a_system_that_does_not_recover_fails_the_hypothesis_after():
    clock = Clock()
    system = System(clock)
    fault = Fault(system, broken=0.2, heals=False)
    exp = Experiment("stuck", fault=fault, hold_s=10, hypothesis=error_share_below(0.05), until=recovered(within=20))
    run, _ = _run(exp, clock, system)
    assert run.status is Status.FAILED and run.exit_code == 1
    assert run.reason.startswith("not recovered within 20 s of the revert: error rate: expected <= 5.00%, got 20.00%")


def test_the_stop_file_stops_within_a_tick_and_says_who(tmp_path):
    clock = Clock()
    system = System(clock)
    fault = Fault(system, broken=0.1)
    stop = StopSwitch(tmp_path / "STOP", since=clock.now)
    asked_at = clock.now + 25
    clock.hooks.append((asked_at, lambda: request_stop(tmp_path, "pager went off", clock=clock)))
    run, bus = _run(Experiment("stopped", fault=fault, hold_s=300), clock, system, stop=stop)
    assert run.status is Status.STOPPED and "chaos stop (" in run.reason and "pager went off" in run.reason
    reverted = next(e for e in bus.events if isinstance(e, ev.FaultReverted))
    assert reverted.t - asked_at <= 0.2


def test_a_stop_file_older_than_the_run_is_ignored(tmp_path):
    clock = Clock()
    request_stop(tmp_path, "yesterday", clock=lambda: clock.now - 3600)
    system = System(clock)
    run, _ = _run(Experiment("fresh", fault=Fault(system, broken=0.0), hold_s=5), clock, system,
                  stop=StopSwitch(tmp_path / "STOP", since=clock.now))
    assert run.status is Status.PASSED


def test_a_broken_subscriber_is_unhooked_and_the_fault_still_reverts(capsys):
    clock = Clock()
    system = System(clock)
    fault = Fault(system, broken=0.1)
    bus = EventBus()

    def broken(event):
        if isinstance(event, ev.FaultInjected):
            raise OSError("disk full")

    bus.subscribe(broken)
    run, _ = _run(Experiment("subscriber", fault=fault, hold_s=5), clock, system, bus=bus)
    assert run.status is Status.PASSED and fault.log == ["inject", "revert"]
    assert "failed on FaultInjected: disk full; unhooked" in capsys.readouterr().err


def test_a_failing_verdict_fails_the_experiment_with_its_rows():
    from chaos.verify.verdict import Verdict

    clock = Clock()
    system = System(clock)

    def lost(run):
        v = Verdict("accounting")
        v.add("lost", 0, 3, False)
        return v

    run, bus = _run(Experiment("verdicts", fault=Fault(system, broken=0.0), hold_s=5, verdicts=[lost]), clock, system)
    assert run.status is Status.FAILED and "lost: measured 3, limit 0 -> FAIL" in run.reason
    assert next(e for e in bus.events if isinstance(e, ev.VerdictReached)).ok is False


def test_a_fault_that_lapsed_during_the_hold_is_an_error_not_a_pass():
    clock = Clock()
    system = System(clock)
    fault = Fault(system, broken=0.1, lapses=True)
    run, bus = _run(Experiment("lapsed", fault=fault, hold_s=5, hypothesis=error_share_below(0.5),
                               until=recovered(within=10)), clock, system)
    assert run.status is Status.ERROR and run.reason.startswith("fault not effective: ")
    assert fault.log == ["inject", "revert"]
    reverted = next(e for e in bus.events if isinstance(e, ev.FaultReverted))
    assert reverted.ok and "lapsed before the revert" in reverted.error


class LateLoad:
    """A load whose first request is recorded `late_s` after it starts (Locust's start on a busy machine)."""

    def __init__(self, clock: Clock, late_s: float) -> None:
        self.clock, self.t0 = clock, clock.now + late_s
        self.system = System(clock)

    def progress(self) -> tuple[int, int]:
        return (len(self.records()), 0)

    def records(self) -> list[RequestRecord]:
        return [r for r in self.system.records() if r.t_send >= self.t0]

    def stop(self) -> None:
        return None


@pytest.mark.parametrize("late_s,status", [(9.8, Status.PASSED), (61.0, Status.REFUSED)])
def test_the_steady_state_window_begins_once_the_load_has_recorded_a_request(late_s, status):
    clock = Clock()
    load = LateLoad(clock, late_s)
    exp = Experiment("late load", load=lambda: load, hold_s=5, hypothesis=error_share_below(0.05, min_requests=10))
    run = exp.run(bus=EventBus(), clock=clock, sleep=clock.sleep, records=load.records)
    assert run.status is status, run.reason
    if status is Status.REFUSED:
        assert "the load recorded no request in 60 s after it started" in run.reason, run.reason
