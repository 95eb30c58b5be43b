"""The CPU watch's judgement: a starved client waited far longer than it ran; a busy or idle one was not.

Figures are fed in (the watch's task reader is injected): the real schedstat path, a client in a CPU
cgroup capped at 2 % of a core, is tests/integration/verify/test_starved_client.py."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from chaos.env import load
from chaos.errors import SLOViolation
from chaos.experiment.run import Run
from chaos.load.runner import LoadResult
from chaos.shared.cpu_watch import CpuUse, CpuWatch, starved_of
from chaos.verify.starved import starved_verdict
from chaos.verify.verdict import Verdict, on_judged


@pytest.mark.parametrize("use, starved", [
    (CpuUse(0.47, 179.0, 181.0), True),    # a TP 2 engine's ranks busy-polling both cores
    (CpuUse(0.37, 18.0, 22.0), True),      # a CPU cgroup capped at 2 % of a core
    (CpuUse(10.0, 15.0, 30.0), False),     # a busy machine's fair share: waited 1.5x what it ran
    (CpuUse(0.1, 1.5, 3.0), False),        # 15x, but under two seconds of wait: scheduling noise
    (CpuUse(0.1, 2.5, 60.0), False),       # 25x, but a twentieth of the time: it mostly slept (backoff)
])
def test_starved_is_waiting_far_longer_than_running_for_a_good_share_of_the_time(use, starved):
    assert use.starved is starved


def test_the_words_name_cpu_seconds_in_wall_seconds():
    assert CpuUse(0.47, 179.0, 181.0).why().startswith("the host starved the client (0.47 s of CPU in 181.0 s;")


def test_the_watch_keeps_each_task_s_last_figures_and_tells_once_starved(monkeypatch):
    monkeypatch.setattr("chaos.shared.cpu_watch.EARLY_S", 0.0)
    figures = {7: {(7, 7): (10_000_000, 3_000_000_000), (8, 8): (5_000_000, 500_000_000)}}
    told = []
    w = CpuWatch(tasks=lambda leaders: {x: figures[x] for x in leaders}, on_starved=lambda leader, u: told.append(leader))
    w.watched = True
    w.watch(7)
    w._sample({7})
    figures[7] = {(7, 7): (20_000_000, 4_000_000_000)}  # task 8 ended: its last figures still count
    use = w.done(7)
    assert use is not None and use.tasks == 2
    assert use.cpu_s == pytest.approx(0.025) and use.wait_s == pytest.approx(4.5)
    w.stop()


def test_a_watch_where_the_kernel_keeps_no_schedstat_claims_nothing():
    w = CpuWatch(tasks=lambda leaders: {})
    w.watched = False
    w.watch(7)
    assert w.done(7) is None and starved_of([None]) is None


def test_a_starved_client_s_verdict_is_not_proven_and_its_fail_is_not_judged():
    v = Verdict("backoff compliance")
    v.add("retries", "all retried", "0/6 retried", False, "the client sent no retry")
    v.add("min_interval", 0.5, 0.6, True)
    assert starved_verdict(v, {"r0": CpuUse(0.3, 60.0, 68.0), "r1": CpuUse(5.0, 1.0, 68.0)}) is True
    assert [r.check for r in v.rows] == ["client_cpu", "retries", "min_interval"]
    assert v.ok and not v.failures and v.rows[0].unproven.startswith("the host starved the client (0.30 s of CPU")
    assert v.row("retries").ok is None and "not judged, the client was starved" in v.row("retries").detail
    v.assert_ok()


def test_a_client_that_ran_keeps_its_fail():
    v = Verdict("backoff compliance")
    v.add("retries", "all retried", "0/6 retried", False)
    assert starved_verdict(v, {"r0": CpuUse(2.0, 1.0, 20.0), "r1": None}) is False
    with pytest.raises(SLOViolation):
        v.assert_ok()


def _meta(cpu: float, wait: float | None, wall: float, pid: int) -> dict:
    return {"cpu_s": cpu, "wait_s": wait, "wall_s": wall, "pid": pid}


def test_a_run_whose_load_generator_was_starved_judges_nothing_and_says_why(tmp_path: Path):
    run = Run(load("local", environ={}), "starved-load", tmp_path, clock=lambda: 1000.0, sleep=lambda s: None)
    result = LoadResult([], tmp_path, [0], 60.0, SimpleNamespace(), client_cpu=[_meta(0.4, 50.0, 60.0, 11),
                                                                               _meta(3.0, None, 60.0, 12)])
    run.load_cpu.update(result.generator_cpu())
    v = Verdict("availability")
    v.add("errors", 0.01, 0.2, False)
    heard: list[Verdict] = []
    forget = on_judged(heard.append)
    try:
        run.judge("the system behaved", [v])  # the FAIL measured a starved generator: not judged, no SLOViolation
    finally:
        forget()
    assert v.row("errors").ok is None
    why = [r.unproven for h in heard for r in h.unproven]
    assert why and why[0].startswith("the host starved the load generator (0.40 s of CPU in 60.0 s;"), why
    run.close()
    said = (tmp_path / "summary.md").read_text()  # the journal never reads a not-proven verdict as holding
    assert "the load generator ran: not proven: load_generator_cpu" in said, said


def test_a_run_whose_load_generator_ran_keeps_its_fail(tmp_path: Path):
    run = Run(load("local", environ={}), "fed-load", tmp_path, clock=lambda: 1000.0, sleep=lambda s: None)
    result = LoadResult([], tmp_path, [0], 60.0, SimpleNamespace(), client_cpu=[_meta(30.0, 20.0, 60.0, 11)])
    run.load_cpu.update(result.generator_cpu())
    v = Verdict("availability")
    v.add("errors", 0.01, 0.2, False)
    with pytest.raises(SLOViolation):
        run.judge("the system behaved", [v])
    run.close()
