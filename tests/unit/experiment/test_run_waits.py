"""The run handle's waits on its own clock: what the suites use instead of sleeping to poll."""
from __future__ import annotations

from types import SimpleNamespace

from chaos.env import load
from chaos.experiment.run import Run


def _scenario(tmp_path):
    now = [1000.0]
    sc = Run(load("local", environ={}), "waits", tmp_path, clock=lambda: now[0],
                  sleep=lambda s: now.__setitem__(0, now[0] + s))
    return sc, now


def test_wait_lets_the_clock_run_and_names_its_phase(tmp_path):
    sc, now = _scenario(tmp_path)
    sc.wait(12.5, "no fault: same load")
    assert abs(now[0] - 1012.5) < 1e-6
    assert [e.name for e in sc.timeline.find_events("phase")] == ["no fault: same load"]
    sc.wait(0.3)
    assert abs(now[0] - 1012.8) < 1e-6


def test_poll_returns_as_soon_as_it_holds_or_false_at_the_timeout(tmp_path):
    sc, now = _scenario(tmp_path)
    assert sc.poll(lambda: now[0] >= 1003.0, timeout=10, every=0.5) is True and abs(now[0] - 1003.0) < 1e-6
    asked = []
    assert sc.poll(lambda: asked.append(now[0]) and False, timeout=2, every=0.5) is False
    assert len(asked) == 5 and abs(now[0] - 1005.0) < 1e-6  # asked at 0, 0.5, ..., 2.0: once more at the end


def test_stop_load_collects_once_and_keeps_the_records(tmp_path):
    sc, _ = _scenario(tmp_path)
    stopped = []
    result = SimpleNamespace(records=["r1", "r2"], lost_workers=[], generator_cpu=dict)
    sc.load = SimpleNamespace(stop=lambda: stopped.append(1) or result)
    assert sc.stop_load() == ["r1", "r2"] and sc.records == ["r1", "r2"] and sc.load is None
    assert sc.stop_load() == ["r1", "r2"] and stopped == [1]


def test_the_steady_window_begins_once_the_load_has_recorded_a_request(tmp_path):
    # a fault injected before the load flows is judged against no request in flight (a lab crash 2 s after
    # the load started: 0 open at the kill, the allowance the error budget alone)
    sc, now = _scenario(tmp_path)
    flows_at = 1004.0  # Locust's start on a busy machine
    sc.load = SimpleNamespace(progress=lambda: (0, 0) if now[0] < flows_at else (3, 0))
    sc.steady_state(2.0)
    assert now[0] >= flows_at + 2.0 - 1e-6, now[0]


def test_a_load_that_never_records_a_request_fails_the_steady_state(tmp_path):
    import pytest

    from chaos.errors import SLOViolation
    from chaos.experiment.run import LOAD_START_S

    sc, now = _scenario(tmp_path)
    sc.load = SimpleNamespace(progress=lambda: (0, 0))
    with pytest.raises(SLOViolation, match="the load recorded no request"):
        sc.steady_state(2.0)
    assert now[0] - 1000.0 >= LOAD_START_S
