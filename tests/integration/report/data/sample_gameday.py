"""A tiny game day for the report tests and the README screenshot: synthetic records, real helpers.

Run by tests/integration/report/test_html_report.py under pytest with --alluredir; it is not collected itself.
"""
from __future__ import annotations

import random

import pytest

from chaos.errors import FaultError, SLOViolation
from chaos.load.records import RequestRecord
from chaos.observe.timeline import Timeline
from chaos.report import allure as rep
from chaos.report.tables import latency_table, verdict_table
from chaos.report.timeline import plot_breaker, plot_timeline

T0 = 1_700_000_000.0


def _run(fault_start: float, fault_end: float, err: float, seed: int) -> tuple[list[RequestRecord], Timeline]:
    rnd = random.Random(seed)
    tl = Timeline(clock=lambda: T0)
    recs = []
    for i in range(600):
        t = T0 + i * 0.1
        hurt = fault_start <= t - T0 < fault_end
        ok = rnd.random() > (err if hurt else 0.002)
        cls = rnd.choices(["short", "long", "xl"], [7, 2, 1])[0]
        base = {"short": 0.2, "long": 0.8, "xl": 2.0}[cls] * (3 if hurt else 1)
        recs.append(RequestRecord(f"r{i}", 1, t, ttft=base / 4, e2e=base * rnd.uniform(0.8, 1.2) if ok else 0.05,
                                  error=None if ok else "reset", prompt_class=cls, outcome="succeeded",
                                  served_by="canary/replica-c" if rnd.random() < (0.1 if t - T0 < fault_start + 3 else 0)
                                  else "stable/replica-a"))
    for name, t in [("steady state", 0), ("inject", fault_start), ("recover", fault_end), ("verify", 55)]:
        tl.event("phase", name, t=T0 + t)
    tl.event("fault_inject", "kill replica-a", t=T0 + fault_start)
    tl.event("fault_revert", "kill replica-a", t=T0 + fault_end)
    for k in range(60):
        tl.sample("health", "status", 503 if fault_start + 1 <= k < fault_end + 2 else 200, t=T0 + k, target="replica-a")
        tl.sample("health", "status", 200, t=T0 + k, target="replica-b")
        state = "closed" if k < fault_start + 3 else "forced_open" if k < fault_end + 8 else "closed"
        tl.sample("gateway", "pool_state", state, t=T0 + k, pool="canary")
        tl.sample("gateway", "pool_state", "closed", t=T0 + k, pool="stable")
    return recs, tl


def _report(recs, tl, verdicts, title):
    rep.attach_png(plot_timeline(recs, tl, title=title), "timeline")
    rep.attach_table(verdict_table(verdicts), "verdicts")
    rep.attach_table(latency_table(recs), "latency per class")
    rep.attach_log_tail("\n".join(f"INFO step {i} ok" for i in range(300)) + "\nERROR engine died", "replica-a log")


@pytest.mark.parametrize("target", ["replica-a"])
def test_recovery_after_sigkill(target):
    rep.labels(epic="Resilience", feature="Recovery", story="Crash by SIGKILL")
    recs, tl = _run(20, 30, 0.5, 1)
    with rep.phase("steady state"):
        pass
    with rep.phase("inject: SIGKILL " + target):
        pass
    with rep.phase("verify"):
        _report(recs, tl, [{"name": "fault happened", "stage": "fault", "passed": True},
                           {"name": "recovery", "stage": "system", "limit": 6.0, "measured": 4.2, "passed": True}],
                "recovery: SIGKILL replica-a")


def test_breaker_rollback_at_4_percent():
    rep.labels(epic="Resilience", feature="Breaker", story="Forced rollback at 3 %")
    recs, tl = _run(15, 35, 0.04, 2)
    rep.attach_png(plot_breaker(tl, [(T0 + 17.5, "error rate >= 3 %")], recs, title="breaker: canary 4 % errors"),
                   "breaker timeline")
    with rep.phase("verify"):
        v = SLOViolation("recovery took 9.8 s > limit 6.0 s", limit=6.0, measured=9.8)
        _report(recs, tl, [v], "breaker: canary 4 % errors")
        raise v


def test_network_jitter_fault_not_injected():
    rep.labels(epic="Resilience", feature="Network", story="Jitter 300 ms - 5 s")
    with rep.phase("inject: latency toxic"):
        raise FaultError("toxiproxy refused the toxic", fault="jitter")
