"""An Explorer wired to an environment the usual way: faults as `chaos fault inject` makes them, the
environment's load, a real completion as the probe, the replicas' request log, and the gateway's
breakers where it shows them. `chaos explore`, `chaos replay` and suites/regressions all use this."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from chaos.experiment.events import EventBus
from chaos.experiment.stop import StopSwitch
from chaos.explore.explorer import Explorer


def explorer_for(env: Any, stack: Any, out_dir: Path, bus: EventBus, stop: StopSwitch, *, allow_destructive: bool,
                 server_log: Callable[[list[Any]], Any]) -> Explorer:
    """An explorer wired to the environment's stack, load and faults (what `chaos explore` runs)."""
    from chaos.experiment.gameday import make_fault
    from chaos.experiment.plan import PlanFault
    from chaos.load.runner import start_env_load
    from chaos.observe.completion import completion_ok
    from chaos.observe.gateway import env_admin_call

    def fault(f: Any) -> Any:
        return make_fault(env, stack, PlanFault(kind=f.kind, target=f.target, proxy=f.proxy, **f.params()),
                          allow_destructive=allow_destructive)

    def load(out: Path, seconds: float, seed: int) -> Any:
        return start_env_load(env, out_dir=out / "load", duration_s=seconds, seed=seed)

    admin = bool(env.endpoints.gateway_admin)
    return Explorer(env, stack, out_dir, bus, stop, fault, load,
                    probe=lambda url: completion_ok(url, env.endpoints.model, 2.0, api_key=env.endpoints.api_key),
                    server_log=server_log,
                    gateway_state=(lambda: env_admin_call(env, "GET", "/admin/state")) if admin else None,
                    gateway_reset=(lambda: env_admin_call(env, "POST", "/admin/reset", {})) if admin else None)
