"""Planted defects: deliberate bugs the reference gateway can be started with, so that `chaos explore`
can be shown to find a bug nobody scripted (issue 18). Never on unless asked for by name, through the
environment variable CHAOS_PLANTED_DEFECT of the gateway's process; the gateway logs it at start.

rollback-forgotten-on-restart
    When a replica restarts (its process_start_time_seconds changes) while any breaker is tripped
    (open, half-open or rolled back), the gateway "rebuilds its pools" and starts every breaker
    afresh. Meant to give a restarted replica a clean slate, it also ends a forced rollback, which
    only an operator reset may end: a rolled-back canary gets traffic again. It takes two things at
    once, a rollback and a restart of any replica while it holds, which no single-fault scenario of
    the suites does.
"""
from __future__ import annotations

import os

from chaos.errors import ConfigError

ENV_VAR = "CHAOS_PLANTED_DEFECT"
ROLLBACK_FORGOTTEN_ON_RESTART = "rollback-forgotten-on-restart"
KNOWN = (ROLLBACK_FORGOTTEN_ON_RESTART,)


def planted_from_env() -> str | None:
    """The defect named by CHAOS_PLANTED_DEFECT (None when unset or empty)."""
    name = os.environ.get(ENV_VAR, "").strip()
    if not name:
        return None
    if name not in KNOWN:
        raise ConfigError(f"{ENV_VAR}={name!r}: expected one of {', '.join(KNOWN)} (or unset)")
    return name
