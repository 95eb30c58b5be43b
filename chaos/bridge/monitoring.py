"""The session's monitoring for a face (the pytest fixture, `chaos gameday`): the team's Prometheus, or
embedded real Prometheus and Alertmanager paging the harness's webhook receiver; an AlertMonitor whose
rows are "not proven" (and say why) where nothing can be read."""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from chaos.errors import StackError
from chaos.observe.alerts import WebhookReceiver
from chaos.verify.alert_watch import AlertMonitor


def monitoring_missing(env: Any) -> str | None:
    """Why the embedded Prometheus/Alertmanager cannot run here (None: both programs are installed)."""
    from chaos.stack.monitoring import find_binary

    mon = env.monitoring
    wanted = ["prometheus"] if mon and mon.prometheus.embedded else []
    wanted += ["alertmanager"] if mon and mon.alertmanager and mon.alertmanager.embedded else []
    for f in mon.rule_files if mon else []:
        if not os.path.isfile(f):
            return f"rule file {f} not found (monitoring.rule_files)"
    for component in wanted:
        try:
            find_binary(component)
        except StackError as e:
            return str(e)
    return None


@contextmanager
def alert_monitor(env: Any, *, required: bool = False) -> Iterator[AlertMonitor]:
    """`env`'s monitoring, started after the stack (its scrape targets) and stopped on leaving; with
    `required` (CHAOS_REQUIRE=prometheus) an embedded one that cannot run raises StackError instead."""
    mon = env.monitoring
    if mon is None:
        yield AlertMonitor(None, None, None, f"the environment {env.name} names no Prometheus (no monitoring section)")
        return
    if not mon.prometheus.embedded:
        am = mon.alertmanager
        why = "" if am is None or not am.url else "the team's alertmanager pages its own receivers, not the harness's"
        yield AlertMonitor(mon, str(mon.prometheus.url), None, why)
        return
    if (missing := monitoring_missing(env)) is not None:
        if required:
            raise StackError(f"prometheus required by CHAOS_REQUIRE but unavailable: {missing}")
        yield AlertMonitor(mon, None, None, missing)
        return
    from chaos.stack.monitoring import EmbeddedMonitoring

    receiver = WebhookReceiver().start()
    embedded = EmbeddedMonitoring(env, receiver.url)
    try:
        embedded.up()
    except StackError as e:
        receiver.stop()
        if required:
            raise StackError(f"embedded monitoring failed to start: {e}") from None
        yield AlertMonitor(mon, None, None, f"embedded monitoring failed to start: {e}")
        return
    try:
        yield AlertMonitor(mon, embedded.prometheus_url, receiver if embedded.alertmanager else None)
    finally:
        embedded.down()
        receiver.stop()
