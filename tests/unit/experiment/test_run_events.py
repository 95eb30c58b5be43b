"""A suite's Run handle walks the same experiment method as the declared sequence: its phases, fault
and verdicts are typed events that the timeline, the journal and the Allure steps hear; `chaos stop`
ends its waits and its fault is reverted on every way out."""
from __future__ import annotations

import json

import pytest

from chaos.env import load
from chaos.errors import FaultError, FaultNotEffective
from chaos.experiment import events as ev
from chaos.experiment import request_stop
from chaos.experiment.method import StopAsked
from chaos.experiment.run import Run
from chaos.verify.verdict import Verdict


class Fault:
    def __init__(self, *, lapse: bool = False, fail_revert: bool = False) -> None:
        self.lapse, self.fail_revert, self.log = lapse, fail_revert, []

    def inject(self):
        self.log.append("inject")
        return {"pid": 7}

    def revert(self, check: bool = True):
        self.log.append(f"revert check={check}")
        if self.fail_revert and check:
            raise FaultError("revert failed: the proxy is gone")
        if self.lapse and check:
            raise FaultNotEffective("was no longer in effect before revert")

    def __repr__(self) -> str:
        return "Fault()"


def _scenario(tmp_path, **kw):
    now = [1000.0]
    env = load("local", environ={}).model_copy(update={"state_dir": str(tmp_path / "state")})
    sc = Run(env, "kill replica-a", tmp_path / "out", clock=lambda: now[0],
                  sleep=lambda s: now.__setitem__(0, now[0] + s), **kw)
    return sc, now


def test_phases_fault_and_verdicts_reach_timeline_and_journal_as_events(tmp_path):
    sc, now = _scenario(tmp_path)
    fault = Fault()
    assert sc.inject(fault) == {"pid": 7}
    sc.hold(5.0)
    sc.revert()
    ok, bad = Verdict("recovery"), Verdict("accounting")
    ok.add("first_completion_s", 30, 4.2, True)
    bad.add("lost", 0, 3, False)
    with pytest.raises(AssertionError):
        sc.judge("the system behaved", [ok, bad])
    sc.close("FAILED", "3 requests lost")

    kinds = [type(e).__name__ for e in sc.bus.events]
    assert kinds[0] == "ExperimentStarted" and kinds[-1] == "ExperimentEnded"
    assert kinds.count("FaultInjected") == 1 and kinds.count("FaultReverted") == 1
    verdicts = [e for e in sc.bus.events if isinstance(e, ev.VerdictReached)]
    assert [(v.name, v.ok) for v in verdicts] == [("the system behaved: recovery", True),
                                                  ("the system behaved: accounting", False)]
    # the timeline: phase markers with their end, and a fault window the plot can shade
    phases = {e.name: e.detail for e in sc.timeline.find_events("phase")}
    assert phases["hold fault"]["duration_s"] == pytest.approx(5.0) and phases["hold fault"]["status"] == "passed"
    assert phases["verify: the system behaved"]["status"] == "failed"
    (inj,), (rev,) = sc.timeline.find_events("fault_inject"), sc.timeline.find_events("fault_revert")
    assert rev.t - inj.t == pytest.approx(5.0) and sc.fault_window == (inj.t, rev.t)
    # the journal on disk: every event, and a summary that names what deviated
    data = json.loads((tmp_path / "out" / "journal.json").read_text())
    assert [e["event"] for e in data["events"]] == kinds
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "| kill replica-a | FAILED | 3 requests lost |" in summary
    assert summary.split("**What deviated.**")[1].strip() == \
        "verdict the system behaved: accounting: lost: measured 3, limit 0 -> FAIL"


def test_close_reverts_a_fault_left_in_place_even_when_its_proof_fails(tmp_path):
    for fault in (Fault(lapse=True), Fault(fail_revert=True)):
        sc, _ = _scenario(tmp_path)
        sc.inject(fault)
        sc.close("FAILED")
        assert fault.log[0] == "inject" and fault.log[1] == "revert check=True"
        assert fault.log[-1] == ("revert check=True" if fault.lapse else "revert check=False")
        assert sc.fault is None


def test_chaos_stop_ends_a_wait_and_the_fault_is_reverted(tmp_path):
    sc, now = _scenario(tmp_path)
    fault = Fault()
    sc.inject(fault)
    request_stop(sc.env.state_dir, "game over", clock=lambda: now[0] + 1.0)
    with pytest.raises(StopAsked, match="game over"):
        sc.hold(60.0)
    assert now[0] - 1000.0 < 0.5  # the first tick saw it
    sc.close("FAILED")
    assert fault.log == ["inject", "revert check=True"]
    assert any(isinstance(e, ev.PhaseEnded) and e.phase == "hold fault" and e.status == "broken" for e in sc.bus.events)


def test_a_stop_file_older_than_the_scenario_is_ignored(tmp_path):
    env = load("local", environ={}).model_copy(update={"state_dir": str(tmp_path / "state")})
    request_stop(env.state_dir, "yesterday's", clock=lambda: 500.0)
    sc, now = _scenario(tmp_path)
    sc.wait(3.0, "steady")
    assert now[0] == pytest.approx(1003.0)
