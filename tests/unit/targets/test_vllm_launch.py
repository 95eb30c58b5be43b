"""What the harness hands `vllm serve` for a process target: flags from the `vllm` block, and the environment."""
from __future__ import annotations

from chaos.env.model import Target as TargetConfig
from chaos.targets import vllm_args, vllm_env


def _target(**vllm: object) -> TargetConfig:
    return TargetConfig.model_validate({"name": "replica-a", "kind": "process", "port": 19201, "tp_size": 2,
                                        "vllm": {"max_model_len": 4096, **vllm}, "env": {"OMP_NUM_THREADS": "1"}})


def test_a_compiled_tp2_replica_gets_its_timeout_a_core_per_rank_and_no_eager_flag() -> None:
    cfg = _target(enforce_eager=False, execute_model_timeout_s=4)
    env = vllm_env(cfg)
    assert env["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"] == "4"
    assert env["VLLM_CPU_OMP_THREADS_BIND"].count("|") == 1  # one core per rank
    assert env["OMP_NUM_THREADS"] == "1"
    assert "--enforce-eager" not in vllm_args(cfg)
    assert "--enforce-eager" in vllm_args(_target())


def test_the_target_s_own_env_wins() -> None:
    cfg = TargetConfig.model_validate({"name": "r", "kind": "process", "port": 1, "tp_size": 2, "vllm": {},
                                       "env": {"VLLM_CPU_OMP_THREADS_BIND": "nobind"}})
    assert vllm_env(cfg)["VLLM_CPU_OMP_THREADS_BIND"] == "nobind"
