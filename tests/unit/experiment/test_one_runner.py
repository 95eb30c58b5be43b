"""One runner for every experiment, on a fake clock: an Experiment's own `steps=` act through the run handle
and end the way the declared sequence does (a Status, the fault reverted on every way out, the same events);
under pytest (`reraise=True`, the `run_experiment` fixture) a failed check raises as itself and a skip passes
through, with the fault reverted all the same."""
from __future__ import annotations

import pytest

from chaos.env import load
from chaos.errors import SLOViolation
from chaos.experiment import Experiment, Status
from chaos.experiment import events as ev
from chaos.experiment.handle import RunHandle
from chaos.experiment.run import Run
from chaos.experiment.runner import execute
from tests._support import FakeClock as Clock


class Fault:
    def __init__(self) -> None:
        self.log: list[str] = []

    def inject(self) -> None:
        self.log.append("inject")

    def revert(self, check: bool = True) -> None:
        self.log.append(f"revert check={check}")

    def __repr__(self) -> str:
        return "Fault()"


def _kinds(bus: ev.EventBus) -> list[str]:
    return [e.kind for e in bus.events]


def test_steps_act_through_the_handle_on_its_clock_and_the_run_passes() -> None:
    clock, seen = Clock(), []

    def steps(run: RunHandle) -> None:
        seen.append(run)
        with run.phase("warm up"):
            run.wait(5.0)
        assert run.poll(lambda: clock.now >= 1_007.0, timeout=10.0, every=0.5)

    bus = ev.EventBus()
    r = Experiment("own steps", steps=steps).run(bus=bus, clock=clock, sleep=clock.sleep)
    assert r.status is Status.PASSED and r.exit_code == 0 and isinstance(seen[0], RunHandle)
    assert clock.now == pytest.approx(1_007.0) and r.t_end == pytest.approx(1_007.0)
    assert _kinds(bus) == ["ExperimentStarted", "PhaseStarted", "PhaseEnded", "ExperimentEnded"]


def test_a_failed_check_in_the_steps_fails_the_run_and_the_fault_left_in_place_is_reverted() -> None:
    clock, fault = Clock(), Fault()

    def steps(run: RunHandle) -> None:
        with run.phase("inject"):
            run.method.inject(fault)
        raise SLOViolation("recovery: no real completion within 30.0 s", limit=30.0, measured=None)

    bus = ev.EventBus()
    r = Experiment("fails", steps=steps).run(bus=bus, clock=clock, sleep=clock.sleep)
    assert r.status is Status.FAILED and r.reason.startswith("recovery: no real completion")
    assert fault.log == ["inject", "revert check=False"]  # at once, without the proof
    assert _kinds(bus)[-3:] == ["FaultReverted", "PhaseEnded", "ExperimentEnded"]


def test_an_error_in_the_steps_is_an_error_and_ctrl_c_a_stop() -> None:
    def broken(run: RunHandle) -> None:
        raise RuntimeError("the proxy is gone")

    def interrupted(run: RunHandle) -> None:
        raise KeyboardInterrupt

    clock = Clock()
    assert Experiment("x", steps=broken).run(clock=clock, sleep=clock.sleep).status is Status.ERROR
    r = Experiment("y", steps=interrupted).run(clock=clock, sleep=clock.sleep)
    assert r.status is Status.STOPPED and r.reason == "stopped by Ctrl-C"


def _run(tmp_path, clock: Clock) -> Run:
    env = load("local", environ={}).model_copy(update={"state_dir": str(tmp_path / "state")})
    return Run(env, "under pytest", tmp_path / "out", clock=clock, sleep=clock.sleep)


def test_under_pytest_a_failed_check_raises_as_itself_after_the_status_is_recorded(tmp_path) -> None:
    clock, fault = Clock(), Fault()
    violation = SLOViolation("steady state: no completion succeeded", limit=">= 1 success", measured=0)

    def steps(run: Run) -> None:
        run.inject(fault)
        raise violation

    handle = _run(tmp_path, clock)
    with pytest.raises(SLOViolation) as caught:
        execute(Experiment("under pytest", steps=steps), handle, reraise=True)
    assert caught.value is violation and handle.result is not None and handle.result.status is Status.FAILED
    assert fault.log == ["inject", "revert check=True"]  # proven and reverted on the way out, as at teardown
    handle.close("FAILED", str(violation))
    assert handle.bus.events[-1].kind == "ExperimentEnded" and handle.bus.events[-1].status == "FAILED"  # type: ignore[attr-defined]


def test_under_pytest_a_skip_passes_through_and_the_fault_is_reverted(tmp_path) -> None:
    clock, fault = Clock(), Fault()

    def steps(run: Run) -> None:
        run.inject(fault)
        pytest.skip("the canary cannot get enough calls")

    handle = _run(tmp_path, clock)
    with pytest.raises(pytest.skip.Exception):
        execute(Experiment("skips", steps=steps), handle, reraise=True)
    assert fault.log == ["inject", "revert check=True"]
    handle.close("SKIPPED")


def test_the_declared_sequence_runs_on_a_run_handle_too(tmp_path) -> None:
    clock, fault = Clock(), Fault()
    handle = _run(tmp_path, clock)
    r = execute(Experiment("declared", fault=fault, hold_s=3.0, window_s=2.0), handle, reraise=True)
    handle.close("PASSED")
    assert r.status is Status.PASSED and fault.log == ["inject", "revert check=True"]
    phases = [e.phase for e in handle.bus.events if isinstance(e, ev.PhaseStarted)]  # type: ignore[attr-defined]
    assert phases == ["steady state", "inject", "hold", "revert", "verify"]
