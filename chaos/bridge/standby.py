"""A standby replica: a new one shaped like the smallest stable replica, on free ports, reached
directly (no proxies, no gateway). The cold-start check starts one as it is; the degraded-floor
check starts one in its degraded configuration."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from chaos.env.model import Environment, Target
from chaos.errors import ConfigError
from chaos.shared.proc import free_port


def standby_replica(env: Environment, *, run_id: str, state_dir: str | Path, name: str = "standby",
                    simulator: dict[str, Any] | None = None, vllm: dict[str, Any] | None = None,
                    **changes: Any) -> tuple[Target, Any]:
    """(its config, its target, not yet started). The smallest base: a standby is extra memory on top
    of a running stack (a TP 2 vLLM replica takes about 7 GB here, a TP 1 one about 5 GB).
    `simulator` / `vllm` change fields of the base's backend options (e.g. max_num_seqs 1)."""
    from chaos.experiment.suite_plan import standby_bases
    from chaos.targets import make_target

    bases = standby_bases(env)
    if not bases:
        raise ConfigError(f"environment {env.name}: a standby replica needs a local simulator or vLLM process target")
    base = min(bases, key=lambda t: t.tp_size)
    update: dict[str, Any] = {"name": name, "port": free_port(), "serve_proxy": None, "fault_proxy": None,
                              "rank_proxies": [], "rank_ports": [free_port() for _ in base.rank_ports], **changes}
    if simulator and base.simulator is not None:
        update["simulator"] = base.simulator.model_copy(update=simulator)
    if vllm and base.vllm is not None:
        update["vllm"] = base.vllm.model_copy(update=vllm)
    cfg = base.model_copy(update=update)
    return cfg, make_target(cfg, run_id=run_id, state_dir=state_dir, env=env)
