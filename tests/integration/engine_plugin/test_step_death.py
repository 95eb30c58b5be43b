"""The plugin-backed engine death (chaos.faults.engine_plugin.EngineStepDeath) and the API-server leak,
without vLLM: a stand-in engine reads the real control directory through the plugin's own Control."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from chaos.errors import FaultNotEffective
from chaos.faults.engine_plugin import engine_fault, engine_step_death
from chaos.targets.process import ProcessTarget
from chaos_engine_plugin import control as C
from chaos_engine_plugin import hooks
from tests._support import free_port

# a process standing in for an engine: it 'steps' every 20 ms and, like the plugin's step-error hook,
# records the firing and dies of it (exit 0, as vLLM's API server does after its engine died)
STEPPER = textwrap.dedent("""
    import sys, time
    from chaos_engine_plugin.control import Control
    ctl = Control(sys.argv[1])
    ctl.mark_loaded()
    while True:
        for fid, spec in ctl.faults("step-error"):
            if sys.argv[2] == "steps":
                ctl.fired(fid)
                sys.exit(0)
        for fid, spec in ctl.faults("allreduce-hang"):
            if sys.argv[2] == "steps":
                ctl.fired(fid)  # and 'hangs': the process lives on, as a rank stuck in the collective does
        time.sleep(0.02)
""")


def _engine(tmp_path, mode: str) -> ProcessTarget:
    ctl = tmp_path / "ctl"
    t = ProcessTarget("r", [sys.executable, "-c", STEPPER, str(ctl), mode], port=free_port(),
                      state_dir=tmp_path / "state", env={C.ENV_VAR: str(ctl)}, restart_policy="no")
    t.start()
    for _ in range(200):
        if list(ctl.glob("loaded.*")):
            break
        time.sleep(0.05)
    return t


def test_the_step_exception_is_proven_by_its_firing_and_the_engine_dying(tmp_path, policy):
    t = _engine(tmp_path, "steps")
    try:
        engine = t.pid()
        f = engine_step_death(t, rank=0, death_wait_s=10).using(policy)
        f.inject()
        assert f.evidence["killed_engine_pid"] == engine and f.evidence["fired_pids"] == [engine]
        assert f.times["armed_to_engine_death_s"] < 10
        f.revert(check=False)  # the engine is gone: disarming is what is left, and the ledger is clear
        assert not (tmp_path / "ctl" / f"{f.fault_id}.json").exists()
        assert policy.get_ledger().outstanding() == []
    finally:
        t.remove()


def test_an_engine_that_never_steps_is_not_an_engine_death(tmp_path, policy):
    t = _engine(tmp_path, "idle")
    try:
        f = engine_step_death(t, rank=0, death_wait_s=1).using(policy)
        with pytest.raises(FaultNotEffective, match="no model step raised within 1 s"):
            f.inject()
        assert t.is_running()
        assert policy.get_ledger().outstanding() == []  # a fault that failed its proof is reverted
    finally:
        t.remove()


@pytest.mark.parametrize("mode", ["steps", "idle"])
def test_a_hang_is_proven_where_it_acted_or_not_at_all(tmp_path, policy, mode):
    t = _engine(tmp_path, mode)
    try:
        f = engine_fault(t, "allreduce-hang", rank=1, fired_within_s=2 if mode == "idle" else 10).using(policy)
        if mode == "idle":
            with pytest.raises(FaultNotEffective, match="acted nowhere within 2 s"):
                f.inject()
        else:
            f.inject()
            assert f.evidence["fired_pids"] == [t.pid()]
            f.revert()
        assert policy.get_ledger().outstanding() == []
    finally:
        t.remove()


def test_the_leak_acts_only_in_the_process_it_names(tmp_path):
    """`process: api` leaks in AsyncLLM.add_request (the API server), `engine` in EngineCore.add_request."""
    ctl = C.Control(str(tmp_path))
    ctl.mark_loaded()
    leaked = len(hooks._leaked)
    C.validate("x", {"kind": "leak"})  # the default is the engine, as before
    with pytest.raises(C.SpecError, match="process must be one of engine, api"):
        C.validate("x", {"kind": "leak", "process": "gpu"})
    subprocess.run(C.write_command(str(tmp_path), "l1", {"kind": "leak", "bytes_per_request": 1 << 20, "process": "api"}),
                   check=True)
    ctl._next = 0.0
    hooks._leak(ctl, "engine")
    assert len(hooks._leaked) == leaked
    hooks._leak(ctl, "api")
    assert len(hooks._leaked) == leaked + 1 and len(hooks._leaked[-1]) == 1 << 20
    assert (tmp_path / f"l1.fired.{os.getpid()}").exists()
    del hooks._leaked[leaked:]
