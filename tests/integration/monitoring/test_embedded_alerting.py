"""End to end on a real Prometheus and Alertmanager: a gateway page whose canary fails 4 % of calls
pages the error-rate alerts at the harness's webhook receiver, and they clear; with the rollback
alert removed from the rules the same fault is a blind spot; a quiet page pages nobody."""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from chaos.env import Environment
from chaos.fixtures.monitoring import monitoring_missing
from chaos.observe.alerts import WebhookReceiver
from chaos.pytest_plugin import require_component
from chaos.stack.monitoring import EmbeddedMonitoring
from chaos.verify.alert_watch import AlertMonitor
from tests._support import rules_without

RULES = Path(__file__).resolve().parents[3] / "examples" / "monitoring" / "rules" / "llm-serving.rules.yml"
pytestmark = pytest.mark.slow


class GatewayPage:
    """A gateway's /metrics page: the canary pool answers 100 calls/s, `error_share` of them failing."""

    def __init__(self) -> None:
        self.error_share = 0.0
        self.ok = self.err = 0.0
        self.last = time.monotonic()
        page = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                body = page.render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def render(self) -> str:
        now = time.monotonic()
        calls, self.last = 100 * (now - self.last), now
        self.err += calls * self.error_share
        self.ok += calls * (1 - self.error_share)
        return ("# TYPE chaos_gateway_requests_total counter\n"
                f'chaos_gateway_requests_total{{pool="canary",replica="c",outcome="ok"}} {self.ok}\n'
                f'chaos_gateway_requests_total{{pool="canary",replica="c",outcome="error"}} {self.err}\n')

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


def environment(page: GatewayPage, rules: Path, state_dir: Path) -> Environment:
    return Environment.model_validate({
        "name": "monitoring-e2e", "state_dir": str(state_dir),
        "endpoints": {"api": "http://127.0.0.1:9", "gateway_admin": page.url},
        "monitoring": {"prometheus": {"embedded": True}, "alertmanager": {"embedded": True},
                       "rule_files": [str(rules)],
                       "expect": {"errors-rollback": {"fire": ["LLMErrorRateDegrade", "LLMErrorRateRollback"],
                                                      "fire_within_s": 30, "clear_within_s": 60}}}})


@pytest.fixture
def page() -> Iterator[GatewayPage]:
    p = GatewayPage()
    yield p
    p.server.shutdown()


def started(env: Environment) -> tuple[AlertMonitor, EmbeddedMonitoring, WebhookReceiver]:
    require_component("prometheus", monitoring_missing(env))
    rx = WebhookReceiver().start()
    try:
        mon = EmbeddedMonitoring(env, rx.url).up()
    except BaseException:
        rx.stop()
        raise
    return AlertMonitor(env.monitoring, mon.prometheus_url, rx), mon, rx


def four_percent_on_the_canary(monitor: AlertMonitor, page: GatewayPage, hold_s: float) -> Any:
    watch = monitor.watch("errors-rollback")
    time.sleep(3)  # a quiet stretch first: the rate windows see the change
    page.error_share = 0.04
    watch.took_effect()
    time.sleep(hold_s)
    page.error_share = 0.0
    watch.recovered()
    watch.settle()
    return watch.verdict()


def test_four_percent_errors_page_both_tiers_and_clear(page: GatewayPage, tmp_path: Path) -> None:
    monitor, mon, rx = started(environment(page, RULES, tmp_path))
    try:
        v = four_percent_on_the_canary(monitor, page, hold_s=20)
    finally:
        mon.down()
        rx.stop()
    assert v.ok and not v.unproven, [r.line() for r in v.rows]
    for alert in ("LLMErrorRateDegrade", "LLMErrorRateRollback"):
        assert 0 <= v.row(f"{alert}: time to fire").measured <= 30
        # the page comes after the alert fired (both known to about one evaluation interval)
        assert v.row(f"{alert}: time to page").measured >= v.row(f"{alert}: time to fire").measured - 1.0
        assert 0 <= v.row(f"{alert}: time to resolve").measured <= 60
        assert v.row(f"{alert}: time to resolved page").ok is True


def test_without_the_rollback_alert_the_fault_is_a_blind_spot(page: GatewayPage, tmp_path: Path) -> None:
    monitor, mon, rx = started(environment(page, rules_without(RULES, "LLMErrorRateRollback", tmp_path), tmp_path))
    try:
        v = four_percent_on_the_canary(monitor, page, hold_s=15)
    finally:
        mon.down()
        rx.stop()
    assert [r.check for r in v.failures] == ["blind spot: no alert for errors-rollback"]
    assert "LLMErrorRateRollback never fired" in v.failures[0].detail
    assert v.row("LLMErrorRateDegrade: time to fire").ok is True


def test_a_quiet_baseline_pages_nobody(page: GatewayPage, tmp_path: Path) -> None:
    monitor, mon, rx = started(environment(page, RULES, tmp_path))
    try:
        watch = monitor.watch(None)
        time.sleep(8)
        v = watch.verdict()
    finally:
        mon.down()
        rx.stop()
    assert v.ok and v.row("no alert in the no-fault baseline").ok is True and rx.notifications == []


def test_an_orphaned_prometheus_and_alertmanager_are_reaped_by_cleanup(page: GatewayPage, tmp_path: Path) -> None:
    """After a SIGKILLed run nothing stops them but `chaos cleanup`: their pidfiles name them."""
    from chaos.faults.ledger import _reap_pidfiles
    from chaos.shared import proc as _proc

    _, mon, rx = started(environment(page, RULES, tmp_path))
    try:
        assert mon.prometheus is not None and mon.alertmanager is not None
        pids = [mon.prometheus.proc.pid, mon.alertmanager.proc.pid]  # type: ignore[union-attr]
        assert len(list((tmp_path / "targets").glob("monitoring-*.pid"))) == 2
        reaped = _reap_pidfiles(tmp_path, force=True)
        assert sorted(line.split()[2] for line in reaped) == ["alertmanager", "prometheus"], reaped
        time.sleep(0.5)
        assert not any(_proc.alive(p) for p in pids)
    finally:
        mon.down()
        rx.stop()
    assert list((tmp_path / "targets").glob("*.pid")) == []
