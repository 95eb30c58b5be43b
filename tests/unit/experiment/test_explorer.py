"""chaos explore's loop on stand-ins: the same seed tries the same schedules, a schedule that breaks
heal-and-check is kept as a file naming what it broke, and the budget bounds the run."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from chaos.env import load
from chaos.experiment.events import EventBus
from chaos.experiment.stop import StopSwitch
from chaos.explore.explorer import Explorer, Outcome
from chaos.explore.schedule import load_schedule
from chaos.load.records import RequestRecord

ENV = load("local", environ={}).model_copy(update={"slas": load("local", environ={}).slas.model_copy(
    update={"recovery_s": 1.0})})


class Fault:
    def __init__(self, f, log):
        self.f, self.log = f, log

    def inject(self):
        self.log.append(("in", self.f.kind))

    def revert(self, check=True):
        self.log.append(("out", self.f.kind))


def _explorer(tmp_path: Path, *, healthy) -> tuple[Explorer, list]:
    log: list = []

    def start_load(out_dir, seconds, seed):
        recs = [RequestRecord(f"r{seed}-{i}", 1, 1000.0 + i, ttft=0.01, e2e=0.02, outcome="succeeded")
                for i in range(20)]
        return SimpleNamespace(stop=lambda: SimpleNamespace(records=recs, lost_workers=[]))

    ex = Explorer(ENV, None, tmp_path, EventBus(), StopSwitch(), lambda f: Fault(f, log), start_load,
                  probe=lambda url: healthy(url))
    return ex, log


def _fast(monkeypatch):
    import chaos.explore.explorer as mod

    monkeypatch.setattr(mod, "STEADY_S", 0.0)
    monkeypatch.setattr(mod, "DRAIN_S", 0.0)


def test_the_same_seed_tries_the_same_schedules_and_the_budget_bounds_them(tmp_path, monkeypatch):
    _fast(monkeypatch)
    runs = []
    for k in range(2):
        ex, _ = _explorer(tmp_path / str(k), healthy=lambda url: True)
        ex.run_one = lambda s, seed=0, ex=ex: ex.outcomes.append(  # a stand-in run: the schedules are the point
            Outcome(s, [], [])) or ex.outcomes[-1]
        now = [0.0]

        def clock(now=now):
            now[0] += 10.0  # every look at the clock spends 10 s of the budget
            return now[0]

        ex.explore(7, 400.0, max_faults=2, horizon_s=5.0, allow_destructive=False, say=lambda line: None, clock=clock)
        runs.append([o.schedule.key() for o in ex.outcomes])
        assert (tmp_path / str(k) / "explore.json").exists()
    assert runs[0] == runs[1] and 3 <= len(runs[0]) <= 40


def test_a_schedule_that_breaks_heal_and_check_is_kept_with_what_it_broke(tmp_path, monkeypatch):
    _fast(monkeypatch)
    from chaos.explore.schedule import Schedule, ScheduledFault

    sched = Schedule(horizon_s=0.5, faults=[ScheduledFault(kind="jitter", proxy="client", start_s=0, duration_s=0.2)])
    ex, log = _explorer(tmp_path, healthy=lambda url: not url.endswith(str(ENV.targets[0].port)))
    out = ex.run_one(sched)
    assert not out.ok and log == [("in", "jitter"), ("out", "jitter")]
    assert out.broken().startswith(f"served again after the heal: {ENV.targets[0].name}.first_completion_s")
    kept = load_schedule(out.file)
    assert kept.breaks == out.broken() and kept.key() == sched.key()
    fine, _ = _explorer(tmp_path / "fine", healthy=lambda url: True)
    assert fine.run_one(sched).ok and fine.outcomes[0].file is None


def test_a_failure_is_shrunk_to_the_fault_that_causes_it_and_its_file_replaced(tmp_path, monkeypatch):
    _fast(monkeypatch)
    from chaos.explore.schedule import Schedule, ScheduledFault

    sched = Schedule(horizon_s=0.9, faults=[
        ScheduledFault(kind="jitter", proxy="client", start_s=0.0, duration_s=0.2, latency=900),
        ScheduledFault(kind="restart", target="replica-a", start_s=0.1, duration_s=0.0),
        ScheduledFault(kind="http-error", target="replica-c", start_s=0.2, duration_s=0.3, fraction=0.1)])
    ran: list = []
    # the planted bug: after a restart of replica-a in the run, replica-a never serves again
    ex, log = _explorer(tmp_path, healthy=lambda url: not (url.endswith(str(ENV.target("replica-a").port))
                                                            and ("in", "restart") in ran[-1]))
    ex.make_fault = lambda f: Fault(f, ran[-1])
    original = ex.run_one

    def run_one(s, seed=0, keep=True):
        ran.append([])
        return original(s, seed, keep=keep)

    ex.run_one = run_one
    out = ex.run_one(sched)
    assert not out.ok and out.file is not None and out.file.exists()
    first_file = out.file
    ex.shrink(out, max_runs=10, deadline=1e12, clock=lambda: 0.0, say=lambda line: None)
    assert [f.kind for f in out.schedule.faults] == ["restart"] and out.shrunk_from == sched
    assert out.file != first_file and not first_file.exists()
    assert load_schedule(out.file).breaks.startswith("served again after the heal: replica-a.first_completion_s")
