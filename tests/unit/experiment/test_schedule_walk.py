"""A schedule's faults go in and out at their moments on the method's clock, overlapping; one that will
not inject is noted and the rest go on; a stop mid-schedule reverts every fault in place."""
from __future__ import annotations

import pytest

from chaos.experiment import request_stop
from chaos.experiment.method import Method, StopAsked
from chaos.experiment.stop import StopSwitch, stop_file
from chaos.explore.run import walk
from chaos.explore.schedule import Schedule, ScheduledFault


class Fault:
    def __init__(self, name: str, log: list, now, fail: bool = False) -> None:
        self.name, self.log, self.now, self.fail = name, log, now, fail

    def inject(self):
        if self.fail:
            raise RuntimeError("no such proxy")
        self.log.append(("in", self.name, round(self.now(), 2)))

    def revert(self, check: bool = True):
        self.log.append(("out", self.name, round(self.now(), 2)))


def _setup(tmp_path, faults, stop_at=None):
    now = [100.0]
    switch = StopSwitch(stop_file(tmp_path), since=0.0)

    def sleep(s):
        now[0] += s
        if stop_at is not None and now[0] >= 100.0 + stop_at and switch.asked() is None:
            request_stop(tmp_path, "enough", clock=lambda: now[0])

    m = Method("explore", clock=lambda: now[0], sleep=sleep, stop=switch)
    log: list = []
    sched = Schedule(horizon_s=60, faults=[ScheduledFault(**f) for f in faults])
    bad = {f.get("target") or f.get("proxy") for f in faults if f.get("fail")}
    build = lambda f: Fault(f.target or f.proxy, log, lambda: now[0], fail=(f.target or f.proxy) in bad)  # noqa: E731
    return m, sched, build, log


FAULTS = [{"kind": "jitter", "proxy": "client", "start_s": 2, "duration_s": 10},
          {"kind": "restart", "target": "replica-a", "start_s": 5, "duration_s": 0},
          {"kind": "http-error", "target": "replica-c", "start_s": 8, "duration_s": 20, "fraction": 0.05}]


def test_faults_go_in_and_out_at_their_moments_overlapping(tmp_path):
    m, sched, build, log = _setup(tmp_path, FAULTS)
    run = walk(sched, m, build)
    assert log == [("in", "client", 102.0), ("in", "replica-a", 105.0), ("out", "replica-a", 105.0),
                   ("in", "replica-c", 108.0), ("out", "client", 112.0), ("out", "replica-c", 128.0)]
    assert run.errors == [] and run.t_healed == 128.0 and len(run.injected) == len(run.reverted) == 3
    kinds = [type(e).__name__ for e in m.bus.events if type(e).__name__.startswith("Fault")]
    assert kinds.count("FaultInjected") == 3 and kinds.count("FaultReverted") == 3


def test_a_fault_that_will_not_inject_is_noted_and_the_rest_go_on(tmp_path):
    m, sched, _, log = _setup(tmp_path, [FAULTS[0], FAULTS[2]])
    bad = lambda f: Fault(f.target or f.proxy, log, m.clock, fail=f.proxy == "client")  # noqa: E731
    run = walk(sched, m, bad)
    assert run.errors == ["jitter@client t+2s for 10s: would not inject: no such proxy"]
    # the failed one was reverted at once (whatever part of it took hold), the other ran its course
    assert [e[:2] for e in log] == [("out", "client"), ("in", "replica-c"), ("out", "replica-c")]
    assert [name for _, name in run.reverted] == ["http-error@replica-c t+8s for 20s fraction=0.05"]


def test_a_stop_mid_schedule_reverts_every_fault_in_place(tmp_path):
    m, sched, build, log = _setup(tmp_path, FAULTS, stop_at=10)
    with pytest.raises(StopAsked, match="enough"):
        walk(sched, m, build)
    ins = {name for what, name, _ in log if what == "in"}
    outs = {name for what, name, _ in log if what == "out"}
    assert ins == {"client", "replica-a", "replica-c"} and outs == ins
    assert max(t for _, _, t in log) < 111.0  # reverted at the stop, not at their scheduled ends
