"""Targets: the replicas the harness hurts (local process trees, Docker containers)."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.targets.base import Target

if TYPE_CHECKING:
    from chaos.env import Environment
    from chaos.env import Target as TargetConfig
    from chaos.faults.tokens import TokenRef

__all__ = ["Target", "make_target", "sim_args", "vllm_args", "vllm_env", "admin_token"]


def admin_token(state_dir: str | os.PathLike[str]) -> TokenRef:
    """The embedded stack's admin token (simulators and fault proxies): a 0600 file in the state dir."""
    from chaos.faults.tokens import stack_token

    return stack_token(state_dir)


def sim_args(cfg: TargetConfig, *, run_id: str, state_dir: str | os.PathLike[str],
             env: Environment | None = None) -> list[str]:
    """The `chaos sim` flags for a target with simulator options (without the program itself)."""
    sim = cfg.simulator
    assert sim is not None
    args = ["--host", cfg.host, "--port", str(cfg.port), "--tensor-parallel-size", str(cfg.tp_size),
            "--profile", sim.profile, "--max-num-seqs", str(sim.max_num_seqs),
            "--max-model-len", str(sim.max_model_len),
            "--collective-timeout", f"{sim.collective_timeout_s:g}", "--time-scale", f"{sim.time_scale:g}",
            "--admin-token-file", admin_token(state_dir).file or "",
            "--request-log", str(Path(state_dir).resolve() / f"{cfg.name}.requests.jsonl")]
    if env is not None:
        args += ["--served-model-name", env.endpoints.model]
    if cfg.rank_ports:
        args += ["--tp-ports", ",".join(str(p) for p in cfg.rank_ports)]
        connect = _rank_connect(cfg, env)
        if connect:
            args += ["--tp-connect", ",".join(connect)]
    if sim.startup_delay_s:
        args += ["--startup-delay", f"{sim.startup_delay_s:g}"]
    return args + list(sim.extra_args)


def vllm_args(cfg: TargetConfig, *, env: Environment | None = None, model: str | None = None) -> list[str]:
    """`vllm serve` arguments (model first) for a target with vllm options."""
    v = cfg.vllm
    assert v is not None
    args = [model or v.model, "--host", cfg.host, "--port", str(cfg.port),  # containers run on the host network
            "--tensor-parallel-size", str(cfg.tp_size), "--max-model-len", str(v.max_model_len)]
    if env is not None:
        args += ["--served-model-name", env.endpoints.model]
    if v.max_num_seqs:
        args += ["--max-num-seqs", str(v.max_num_seqs)]
    if v.enforce_eager:
        args.append("--enforce-eager")
    return args + list(v.extra_args)


def vllm_env(cfg: TargetConfig) -> dict[str, str]:
    """The variables real vLLM on CPU needs for this target (the target's own `env` wins)."""
    v = cfg.vllm
    assert v is not None
    out = {"VLLM_CPU_KVCACHE_SPACE": f"{v.kv_cache_gib:g}", "VLLM_HOST_IP": "127.0.0.1",
           "VLLM_LOOPBACK_IP": "127.0.0.1"}
    if cfg.tp_size > 1:  # one core per rank, else the ranks' OpenMP pools fight over every core
        out["VLLM_CPU_OMP_THREADS_BIND"] = "|".join(str(i % (os.cpu_count() or 1)) for i in range(cfg.tp_size))
    if v.execute_model_timeout_s:
        out["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"] = f"{v.execute_model_timeout_s:g}"
    return {**out, **cfg.env}


def _rank_connect(cfg: TargetConfig, env: Environment | None) -> list[str]:
    if not cfg.rank_proxies or env is None or env.toxiproxy is None:
        return []
    listen = {p.name: p.listen for p in env.toxiproxy.proxies}
    return [listen[name] for name in cfg.rank_proxies]


def make_target(target_cfg: TargetConfig, *, run_id: str, state_dir: str | os.PathLike[str],
                env: Environment | None = None, **kw: Any) -> Target:
    """Build the Target a config entry describes (nothing is started)."""
    from chaos.targets.docker import DockerTarget
    from chaos.targets.process import ProcessTarget

    cfg = target_cfg
    args = sim_args(cfg, run_id=run_id, state_dir=state_dir, env=env) if cfg.simulator else []
    variables = vllm_env(cfg) if cfg.vllm else cfg.env
    if cfg.vllm and cfg.vllm.engine_faults:  # the engine plugin's control directory (chaos.faults.engine_plugin)
        from chaos_engine_plugin.control import ENV_VAR

        variables = {**variables, ENV_VAR: str(Path(state_dir).resolve() / "engine-faults" / cfg.name)}
    if cfg.kind == "process":
        if cfg.vllm and not cfg.command:
            v = cfg.vllm
            command = [v.serve, *vllm_args(cfg, env=env)]
        else:
            command = list(cfg.command) or [sys.executable, "-m", "chaos.stack.sim", *args]
            if cfg.command and args:
                command += args
        return ProcessTarget(cfg.name, command, host=cfg.host, port=cfg.port, restart_policy=cfg.restart_policy,
                             restart_delay_s=cfg.restart_delay_s, state_dir=state_dir, run_id=run_id, env=variables,
                             nice=cfg.vllm.nice if cfg.vllm else 0, **kw)
    if cfg.vllm:  # the image's entrypoint is `vllm serve`; the model lives in the image
        args = vllm_args(cfg, env=env, model=cfg.vllm.model)
    state = str(Path(state_dir).resolve())
    Path(state).mkdir(parents=True, exist_ok=True)
    return DockerTarget(cfg.name, cfg.image or "", args=list(cfg.command) + args, port=cfg.port, host=cfg.host,
                        container_name=cfg.container_name, docker_host=cfg.docker_host, run_id=run_id,
                        state_dir=state_dir, restart_policy=cfg.restart_policy, gpus=cfg.gpus, ipc_host=cfg.ipc_host,
                        shm_size=cfg.shm_size, cpus=cfg.cpus, env=variables, volumes={state: {"bind": state, "mode": "rw"}}, **kw)
