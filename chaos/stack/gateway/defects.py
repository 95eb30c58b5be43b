"""Planted defects: deliberate bugs the reference gateway can be started with, so that `chaos explore`
can be shown to find a bug nobody scripted (issue 18). Never on unless asked for by name, through the
environment variable CHAOS_PLANTED_DEFECT of the gateway's process; the gateway logs it at start.

rollback-forgotten-on-restart
    A "fresh start" for restarted replicas, gone wrong: when a replica restarts (its
    process_start_time_seconds changes) within one breaker window of a forced rollback, in either
    order, the gateway takes the rollback for the old process's doing and rebuilds its pools, every
    breaker closed. A rollback ends only by an operator reset; here a restart ends it, and the
    rolled-back canary gets traffic again. No suite scenario restarts a replica around a rollback.

upstream-held-after-disconnect
    Cancellation that frees nothing (vLLM issue 54947's shape): when a streaming client hangs up, the
    gateway keeps reading its upstream answer to the end instead of closing it, so the replica generates
    for nobody. The negative control of the cancellation scenario (suites/streams/test_cancel.py).
"""
from __future__ import annotations

import os

from chaos.errors import ConfigError

ENV_VAR = "CHAOS_PLANTED_DEFECT"
ROLLBACK_FORGOTTEN_ON_RESTART = "rollback-forgotten-on-restart"
UPSTREAM_HELD_AFTER_DISCONNECT = "upstream-held-after-disconnect"
KNOWN = (ROLLBACK_FORGOTTEN_ON_RESTART, UPSTREAM_HELD_AFTER_DISCONNECT)


def planted_from_env() -> str | None:
    """The defect named by CHAOS_PLANTED_DEFECT (None when unset or empty)."""
    name = os.environ.get(ENV_VAR, "").strip()
    if not name:
        return None
    if name not in KNOWN:
        raise ConfigError(f"{ENV_VAR}={name!r}: expected one of {', '.join(KNOWN)} (or unset)")
    return name
