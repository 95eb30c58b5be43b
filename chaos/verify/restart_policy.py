"""A replica that died and stays down: is its restart policy why? (vLLM exits 0 when its engine
dies, so `restart: on-failure` never brings it back.)"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from chaos.errors import SLOViolation


def check_restart_policy(target: Any, cfg: Any, serving: Callable[[], bool], wait_s: float, *,
                         clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> None:
    """Return once `target` runs and `serving()` (a real completion) holds within `wait_s`; else an
    SLOViolation naming the exit code and the restart policy, and the fix when the policy is why.

    Back means a real completion, not /health: vLLM's API server answers /health 200 for a moment
    after its engine died, until its monitor notices (seen on a busy 2-core machine: the negative
    control then passed as "back" before the server had even exited)."""
    deadline = clock() + wait_s
    while clock() < deadline:
        if target.is_running() and serving():
            return
        sleep(0.1)
    exits = [e for e in getattr(target, "events", []) if e[1] == "exit"]
    code = exits[-1][2] if exits else None
    raise SLOViolation(
        f"recovery: replica {cfg.name} is still down {wait_s:g} s after it died with exit code {code}; "
        f"its restart policy is '{cfg.restart_policy}'"
        + (" - vLLM exits 0 when its engine dies, so on-failure never restarts it; use 'always'"
           if code == 0 and cfg.restart_policy == "on-failure" else ""),
        limit=wait_s, measured=None, evidence={"exit_code": code, "restart_policy": cfg.restart_policy})
