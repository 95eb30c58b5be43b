"""The Session wires a run once: the fault policy, the bus and its journal, the emergency stop (signals) and
the stack, and undoes them in reverse whatever happens (the game day, `chaos capacity` and `chaos explore` use it)."""
from __future__ import annotations

import signal
from types import SimpleNamespace
from typing import Any

import pytest

from chaos.experiment import events as ev
from chaos.experiment.session import Session
from chaos.faults import base as fault_base


def _env(tmp_path: Any, embedded: str = "process") -> Any:
    return SimpleNamespace(name="t", state_dir=str(tmp_path / "state"), embedded=embedded,
                           safety=SimpleNamespace(protected=True), slas=SimpleNamespace(cold_start_s=30.0, recovery_s=40.0))


class _Stack:
    def __init__(self) -> None:
        self.downs = 0

    def down(self) -> None:
        self.downs += 1


@pytest.fixture(autouse=True)
def _policy_back() -> Any:
    before = fault_base.current_policy()
    yield
    fault_base.configure(**{f: getattr(before, f) for f in ("ledger", "protected", "allow_destructive",
                                                            "recover_timeout_s")})


def test_a_session_sets_the_policy_starts_the_stack_and_undoes_all_in_reverse(tmp_path):
    stack, started = _Stack(), []
    before = signal.getsignal(signal.SIGTERM)
    s = Session(_env(tmp_path), tmp_path / "run", title="day", meta={"plan": "p.yaml"}, allow_destructive=True,
                start_stack=lambda env: started.append(env.name) or stack)
    with s:
        p = fault_base.current_policy()
        assert (str(p.ledger.state_dir), p.protected, p.allow_destructive, p.recover_timeout_s) == (
            str(tmp_path / "state"), True, True, 80.0)  # twice the recovery SLA: chaos.faults.base.recover_bound_s
        assert signal.getsignal(signal.SIGTERM) is not before  # SIGTERM is an emergency stop while it runs
        assert s.stack is stack and started == ["t"]
        s.bus.publish(ev.Noted(t=1.0, experiment="day", what="x", detail={}))
    assert signal.getsignal(signal.SIGTERM) is before
    assert stack.downs == 1 and s.stack is None
    assert s.journal.events and (tmp_path / "run").is_dir() and any((tmp_path / "run").iterdir())
    assert s.journal.meta == {"environment": "t", "plan": "p.yaml"}


def test_a_failing_run_or_start_still_takes_the_stack_down_and_undoes_the_signals(tmp_path):
    stack = _Stack()
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(RuntimeError), Session(_env(tmp_path), tmp_path / "a", title="a", start_stack=lambda env: stack):
        raise RuntimeError("the run failed")
    assert stack.downs == 1 and signal.getsignal(signal.SIGTERM) is before

    def fails(env: Any) -> Any:
        raise RuntimeError("no stack")

    with pytest.raises(RuntimeError, match="no stack"), Session(_env(tmp_path), tmp_path / "b", title="b",
                                                                start_stack=fails):
        pass
    assert signal.getsignal(signal.SIGTERM) is before and any((tmp_path / "b").iterdir())


def test_no_stack_is_started_for_an_environment_that_is_not_embedded(tmp_path):
    started = []
    with Session(_env(tmp_path, embedded="none"), tmp_path / "r", title="r",
                 start_stack=lambda env: started.append(1)) as s:
        assert s.stack is None
    assert started == []
