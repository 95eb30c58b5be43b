"""The engine plugin's decode-stall on a stand-in for vLLM 0.32's V1 Scheduler (the harness's venv has no
vLLM; tests/vllm runs it in real vLLM): armed, a request past its prompt stays running and gets no step
while a new one is still prefilled (its first token) and the stats still count both; disarmed, decoding
resumes in the order the scheduler kept."""
from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from chaos_engine_plugin import hooks
from chaos_engine_plugin.control import Control


@dataclass
class Req:
    rid: str
    num_prompt_tokens: int
    num_computed_tokens: int = 0


@dataclass
class Out:
    scheduled: list[str]
    total_num_scheduled_tokens: int


class Scheduler:
    """What the hook relies on: `running` read and reassigned, `schedule()` stepping every running request
    (a prefill computes the whole prompt, a decode one token) and admitting the waiting ones."""

    def __init__(self) -> None:
        self.running: list[Req] = []
        self.waiting: list[Req] = []

    def schedule(self) -> Out:
        while self.waiting:
            self.running.append(self.waiting.pop(0))
        scheduled, tokens = [], 0
        for r in self.running:
            step = max(1, r.num_prompt_tokens - r.num_computed_tokens)
            r.num_computed_tokens += step
            scheduled.append(r.rid)
            tokens += step
        return Out(scheduled, tokens)

    def num_running(self) -> int:  # make_stats' len(self.running)
        return len(self.running)


@pytest.fixture
def sched(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[Scheduler, Control, Path]:
    mod = types.ModuleType("vllm.v1.core.sched.scheduler")
    cls = type("Scheduler", (Scheduler,), {})  # a class of its own: the hook patches it in place
    mod.Scheduler = cls  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm.v1.core.sched.scheduler", mod)
    ctl = Control(str(tmp_path), clock=lambda: 1e9)  # re-read on every call
    ctl._next = 0.0
    hooks._hook_decode_stall(ctl)
    return cls(), ctl, tmp_path


def _arm(d: Path, on: bool) -> None:
    f = d / "stall-1.json"
    if on:
        f.write_text(json.dumps({"kind": "decode-stall"}))
    else:
        f.unlink()


def _step(s: Scheduler, ctl: Control) -> Out:
    ctl._next = 0.0  # the control directory is re-read at every step here (REFRESH_S in vLLM)
    return s.schedule()


def test_armed_no_decode_step_but_prefill_and_running_go_on(sched) -> None:
    s, ctl, d = sched
    s.waiting.append(Req("old", 8))
    assert _step(s, ctl).scheduled == ["old"]  # its prefill
    assert _step(s, ctl).scheduled == ["old"]  # a decode step
    _arm(d, True)
    s.waiting.append(Req("new", 5))
    assert _step(s, ctl).scheduled == ["new"]  # admitted and prefilled: its first token comes out
    for _ in range(3):
        out = _step(s, ctl)
        assert out.scheduled == [] and out.total_num_scheduled_tokens == 0  # nothing decodes
        assert [r.rid for r in s.running] == ["old", "new"] and s.num_running() == 2  # both still running
    assert list(d.glob("stall-1.fired.*")), "the fault's fired mark"
    _arm(d, False)
    assert _step(s, ctl).scheduled == ["old", "new"]  # decoding resumes, oldest first


def test_disarmed_the_hook_changes_nothing(sched) -> None:
    s, ctl, d = sched
    s.waiting += [Req("a", 3), Req("b", 4)]
    assert [_step(s, ctl).scheduled for _ in range(3)] == [["a", "b"]] * 3
    assert not list(d.glob("*.fired.*"))
