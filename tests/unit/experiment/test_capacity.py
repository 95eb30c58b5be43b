"""The capacity search on a stand-in trial: rates rise geometrically until one fails to recover, the gap
is bisected, one failed trial fails its rate, the budget stops it, and the curve is drawn."""
from __future__ import annotations

import struct

import pytest

from chaos.checks import Reading
from chaos.env.model import SLAs
from chaos.experiment.capacity import Search, plot, recovery_time, table_rows
from chaos.experiment.runner import ExperimentRun, Status
from chaos.load.records import RequestRecord


def run_at(rate: float, with_fault: bool, limit: float, flaky: set[float] = frozenset()) -> ExperimentRun:
    ok = not with_fault or (rate <= limit and rate not in flaky)
    r = ExperimentRun(f"rate {rate}", status=Status.PASSED if ok else Status.FAILED, t_revert=100.0 if with_fault else None)
    if with_fault and ok:
        r.readings.append(("after", Reading("error rate", "<= 1%", 0.0, True, (100.0, 100.0 + 2.0 + rate / 10), 50)))
    r.records = [RequestRecord(f"q{i}", 1, 100.0 + i / rate, ttft=0.05, e2e=0.1, prompt_class="short",
                               outcome="succeeded") for i in range(int(rate * 10))]
    return r


def test_rates_rise_then_the_gap_is_bisected():
    tried: list[tuple[float, bool]] = []

    def trial(rate, with_fault):
        tried.append((rate, with_fault))
        return run_at(rate, with_fault, limit=12.0)

    s = Search(min_rate=2, max_rate=64, trials=2, refine=2).run(trial)
    assert [p.rate for p in s.points] == [2, 4, 8, 16, 12, 14]
    assert s.capacity() == 12
    # a rate that held ran both trials and its control; 16 and 14 failed on their first trial
    assert tried.count((8, True)) == 2 and tried.count((16, True)) == 1 and (16, False) in tried
    assert s.trials_run() == 4 * 3 + 2 * 2 - 0
    rows = {r[0]: r for r in table_rows(s, SLAs())}
    assert rows[12][1] == "2/2" and rows[12][2] == pytest.approx(3.2) and rows[16][1] == "0/1" and rows[16][2] is None
    assert rows[8][4] == pytest.approx(8.0, rel=0.05)  # the control's goodput: every request within its SLO


def test_one_failed_trial_fails_its_rate_and_capacity_stays_below_it():
    s = Search(min_rate=2, max_rate=64, trials=2, refine=0).run(
        lambda rate, f: run_at(rate, f, limit=64.0, flaky={4.0}))
    assert [p.rate for p in s.points] == [2, 4] and s.capacity() == 2


def test_every_rate_holding_and_none_holding():
    assert Search(min_rate=2, max_rate=8, trials=1).run(lambda r, f: run_at(r, f, limit=99)).capacity() == 8
    assert Search(min_rate=2, max_rate=8, trials=1).run(lambda r, f: run_at(r, f, limit=1)).capacity() is None


def test_the_budget_stops_the_search_and_says_so():
    now = [0.0]

    def trial(rate, with_fault):
        now[0] += 100.0
        return run_at(rate, with_fault, limit=99)

    s = Search(min_rate=2, max_rate=64, trials=2, budget_s=450.0).run(trial, clock=lambda: now[0])
    # rate 2: two trials and its control (300 s); rate 4: two trials, and its control would start past the budget
    assert s.ran_out and [p.rate for p in s.points] == [2, 4] and s.points[1].control is None
    assert s.capacity() == 4 and now[0] == 500.0


def test_recovery_time_is_none_when_it_never_held_and_the_curve_is_drawn(tmp_path):
    failed = run_at(16, True, limit=12)
    assert recovery_time(failed) is None
    s = Search(min_rate=2, max_rate=16, trials=1).run(lambda r, f: run_at(r, f, limit=8))
    png = plot(s, SLAs(), title="t", path=tmp_path / "c.png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">I", png[16:20])[0] == 1000
