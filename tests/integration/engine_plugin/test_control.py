"""The engine plugin's control-directory protocol and its ledgered arming, without vLLM: the harness
writes and removes the files through a real target's exec, the plugin's Control reads them."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import unicodedata

import pytest

from chaos.errors import ConfigError, FaultError
from chaos.faults.engine_plugin import EngineFault, engine_fault
from chaos.faults.ledger import Ledger, cleanup
from chaos.targets.process import ProcessTarget
from chaos_engine_plugin import control as C
from tests._support import free_port


@pytest.fixture
def replica(tmp_path):
    """A process target (a sleeper standing in for `vllm serve`) whose environment enables the plugin,
    with one process having 'loaded' it, as register() does."""
    ctl = tmp_path / "ctl"
    t = ProcessTarget("r", [sys.executable, "-c", "import time; time.sleep(60)"], port=free_port(),
                      state_dir=tmp_path / "state", env={C.ENV_VAR: str(ctl)}, restart_policy="no")
    t.start()
    C.Control(str(ctl)).mark_loaded()
    yield t, ctl
    t.remove()


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_arming_and_disarming_through_the_shell_is_what_the_plugin_reads(tmp_path):
    d, clock = str(tmp_path / "ctl"), Clock()
    ctl = C.Control(d, clock=clock)
    assert ctl.faults("slow-step") == []
    subprocess.run(C.write_command(d, "s1", {"kind": "slow-step", "delay_s": 2, "rank": 1}), check=True)
    assert ctl.faults("slow-step") == []  # not re-read before REFRESH_S: the disarmed cost is a clock read
    clock.t += C.REFRESH_S
    assert ctl.faults("slow-step") == [("s1", {"kind": "slow-step", "delay_s": 2.0, "rank": 1, "fraction": 1.0})]
    assert ctl.faults("corrupt") == []
    subprocess.run(C.remove_command(d, "s1"), check=True)
    subprocess.run(C.remove_command(d, "s1"), check=True)  # idempotent: the ledger may replay it
    clock.t += C.REFRESH_S
    assert ctl.faults("slow-step") == []


def test_a_spec_the_plugin_cannot_read_is_ignored_by_it_and_refused_by_the_harness(tmp_path):
    (tmp_path / "bad.json").write_text('{"kind": "slow-step", "delay_s": "x"}')
    (tmp_path / "torn.json").write_text('{"kind": ')
    assert C.Control(str(tmp_path)).faults("slow-step") == []
    with pytest.raises(C.SpecError, match="delay_s must be float"):
        C.validate("bad", {"kind": "slow-step", "delay_s": "x"})
    with pytest.raises(C.SpecError, match="kind 'nope' is not one of"):
        C.validate("x", {"kind": "nope"})
    with pytest.raises(C.SpecError, match="has no parameter 'rnak'"):
        C.validate("x", {"kind": "step-error", "rnak": 1})
    with pytest.raises(C.SpecError, match="fraction must be within 0..1"):
        C.validate("x", {"kind": "corrupt", "fraction": 2})
    with pytest.raises(C.SpecError, match="fault id"):
        C.validate("../x", {"kind": "corrupt"})


def test_the_corrupted_fraction_is_stable_and_near_what_was_asked():
    ids = [f"cmpl-{i:06x}-0" for i in range(20_000)]
    picked = [i for i in ids if C.selected(i, 0.02)]
    assert 0.015 < len(picked) / len(ids) < 0.025
    assert picked == [i for i in ids if C.selected(i, 0.02)]
    assert not any(C.selected(i, 0.0) for i in ids) and all(C.selected(i, 1.0) for i in ids)


def test_the_tokenizer_crash_is_the_seed_incident_and_nfkc_is_its_control():
    dense = "\U0001F600" * 16 + "e\u0301"  # 16 emoji and a decomposed accent (not NFC)
    assert C.crashes_tokenizer(dense, 15)
    assert not C.crashes_tokenizer(unicodedata.normalize("NFKC", dense), 15)
    assert not C.crashes_tokenizer("\U0001F600" * 15 + "e\u0301", 15)


def test_a_fault_is_armed_with_its_undo_in_the_ledger_and_reverted(replica, policy):
    t, ctl = replica
    f = engine_fault(t, "corrupt", fraction=0.02).using(policy)
    f.inject()
    armed = json.loads((ctl / f"{f.fault_id}.json").read_text())
    assert armed == {"kind": "corrupt", "fraction": 0.02} and f.evidence["armed"].endswith(f"{f.fault_id}.json")
    [rec] = policy.get_ledger().outstanding()
    assert rec["undo"] == [{"kind": "engine_plugin", "target": "r", "dir": str(ctl), "id": f.fault_id,
                            "container": None, "docker_host": None}]
    C.Control(str(ctl)).fired(f.fault_id)  # as the plugin does when the fault acts
    assert f.fired_pids() and len(policy.get_ledger().outstanding()) == 1
    f.revert()
    assert not (ctl / f"{f.fault_id}.json").exists() and policy.get_ledger().outstanding() == []


def test_a_dead_harness_arming_is_undone_by_cleanup(replica, tmp_path):
    t, ctl = replica
    ledger = Ledger(tmp_path / "s2")
    f = EngineFault(t, "step-error", rank=0).using(ledger=ledger)
    f.inject()
    rec = json.loads(ledger.path.read_text().splitlines()[0])
    rec["owner"] = {"pid": 999999, "start": 1}  # written by a harness that is gone
    ledger.path.write_text(json.dumps(rec) + "\n")
    assert cleanup(tmp_path / "s2") == [f"disarmed engine fault {f.fault_id} of r"]
    assert not (ctl / f"{f.fault_id}.json").exists() and C.Control(str(ctl)).faults("step-error") == []
    assert cleanup(tmp_path / "s2") == []


def test_a_replica_without_the_plugin_is_refused_before_anything_is_recorded(tmp_path, policy):
    t = ProcessTarget("bare", [sys.executable, "-c", "import time; time.sleep(60)"], port=free_port(),
                      state_dir=tmp_path / "state", restart_policy="no")
    t.start()
    try:
        with pytest.raises(FaultError, match="engine plugin is off"):
            engine_fault(t, "leak").using(policy).inject()
        t.env[C.ENV_VAR] = str(tmp_path / "empty")
        with pytest.raises(FaultError, match="no process of its vLLM loaded the engine plugin"):
            engine_fault(t, "leak").using(policy).inject()
        assert policy.get_ledger().outstanding() == []
    finally:
        t.remove()
    with pytest.raises(ConfigError, match="delay_s must be float"):
        engine_fault(t, "slow-step", delay_s="slow")


def test_engine_faults_true_gives_the_replica_its_control_directory(tmp_path):
    from chaos.env import load as load_environment
    from chaos.targets import make_target

    env = load_environment("local-vllm")
    cfg = env.targets[1]
    off = cfg.model_copy(update={"vllm": cfg.vllm.model_copy(update={"engine_faults": False})})
    assert C.ENV_VAR not in make_target(off, run_id="t", state_dir=tmp_path).env  # type: ignore[attr-defined]
    on = cfg.model_copy(update={"vllm": cfg.vllm.model_copy(update={"engine_faults": True})})
    t = make_target(on, run_id="t", state_dir=tmp_path)
    assert t.env[C.ENV_VAR] == str(tmp_path.resolve() / "engine-faults" / cfg.name)  # type: ignore[attr-defined]


def test_an_enabled_plugin_gives_the_compiled_graphs_a_cache_root_of_their_own(tmp_path, monkeypatch):
    # vLLM's AOT compile cache is keyed by config, not by the code traced: a graph compiled without the
    # plugin's all-reduce gate must never be loaded by a replica with it (the hang would not fire)
    import chaos_engine_plugin as P

    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "vllm"))
    P._own_compile_cache()
    moved = tmp_path / "vllm" / P.CACHE_SUBDIR
    assert P.os.environ["VLLM_CACHE_ROOT"] == str(moved)
    P._own_compile_cache()  # the engine's and the ranks' processes inherit it: not nested again
    assert P.os.environ["VLLM_CACHE_ROOT"] == str(moved)
    monkeypatch.delenv("VLLM_CACHE_ROOT")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    P._own_compile_cache()  # vLLM's own default root, moved the same way
    assert P.os.environ["VLLM_CACHE_ROOT"] == str(tmp_path / "xdg" / "vllm" / P.CACHE_SUBDIR)


def test_without_torch_the_all_reduce_gate_is_the_plain_check():
    # the harness's venv has no torch (and nothing there traces): the hook still installs and checks
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed here: the op path is tests/vllm/engine_plugin/test_compiled_gate.py")
    from chaos_engine_plugin import gate

    ran: list[object] = []
    gate.define(lambda: ran.append(1))(object())
    assert ran == [1] and gate._ops is None
