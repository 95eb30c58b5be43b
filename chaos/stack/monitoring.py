"""An embedded real Prometheus and Alertmanager (Debian's `prometheus` and `prometheus-alertmanager`),
started and stopped like Toxiproxy: free ports on 127.0.0.1, a temporary directory for config and
storage, one process group each, stopped on exit (and by the session's signal handlers, which end
in the fixtures' teardown).

Prometheus scrapes every replica's /metrics and the gateway's, evaluates the environment's rule
files, and sends to the Alertmanager, which routes every alert to the harness's webhook receiver.
(The fault proxies have no /metrics page; their evidence is their request log.)
"""
from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from chaos.errors import StackError
from chaos.shared import proc as _proc
from chaos.shared.proc import find_program, free_port

BINARIES = {"prometheus": ("CHAOS_PROMETHEUS_BIN", "prometheus"),
            "alertmanager": ("CHAOS_ALERTMANAGER_BIN", "prometheus-alertmanager")}


def find_binary(component: str) -> str:
    """The program of `component` (prometheus, alertmanager) from its $CHAOS_*_BIN or $PATH; StackError if absent."""
    var, name = BINARIES[component]
    found = find_program(var, name, *(("alertmanager",) if component == "alertmanager" else ()))
    if found:
        return found
    raise StackError(f"{name} not found: install Debian's {'prometheus' if component == 'prometheus' else name} "
                     f"package or set {var}")


def scrape_jobs(env: Any) -> dict[str, list[str]]:
    """job -> HOST:PORT of each /metrics page: the replicas (job vllm) and the gateway."""
    jobs: dict[str, list[str]] = {"vllm": [f"{t.host}:{t.port}" for t in env.targets]}
    if env.endpoints.gateway_admin:
        jobs["gateway"] = [urlsplit(str(env.endpoints.gateway_admin)).netloc]
    return jobs


def prometheus_config(jobs: dict[str, list[str]], rule_files: list[str], alertmanager: str | None,
                      scrape_s: float, eval_s: float) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "global": {"scrape_interval": f"{scrape_s:g}s", "evaluation_interval": f"{eval_s:g}s",
                   "scrape_timeout": f"{min(scrape_s, 10):g}s"},
        "rule_files": [str(Path(f).resolve()) for f in rule_files],
        "scrape_configs": [{"job_name": job, "static_configs": [{"targets": hosts}]} for job, hosts in jobs.items()
                           if hosts]}
    if alertmanager:
        cfg["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [urlsplit(alertmanager).netloc]}]}]}
    return cfg


def alertmanager_config(webhook: str, group_wait_s: float, group_interval_s: float) -> dict[str, Any]:
    # one group per alert name, resolved notifications on: the receiver sees each page and its end
    return {"route": {"receiver": "harness", "group_by": ["alertname"], "group_wait": f"{group_wait_s:g}s",
                      "group_interval": f"{group_interval_s:g}s", "repeat_interval": "1h"},
            "receivers": [{"name": "harness", "webhook_configs": [{"url": webhook, "send_resolved": True}]}]}


class _Server:
    """One server process in its own temporary directory; a context manager that always stops it."""

    component = ""

    def __init__(self, args: list[str], workdir: Path, port: int, ready_path: str) -> None:
        self.args, self.workdir, self.port, self.ready_path = args, workdir, port, ready_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.pidfile: Path | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> _Server:
        self._log = open(self.workdir / f"{self.component}.log", "ab")
        self.proc = subprocess.Popen([find_binary(self.component), *self.args], stdout=self._log,
                                     stderr=subprocess.STDOUT, cwd=self.workdir,
                                     process_group=_proc.STACK_PROCESS_GROUP)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.stop()
                raise StackError(f"{self.component} exited with {code} at start: {self.log_tail()}")
            if http_ok(self.url + self.ready_path):
                return self
            time.sleep(0.1)
        self.stop()
        raise StackError(f"{self.component} on {self.url} was not ready within {timeout:g}s: {self.log_tail()}")

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = (self.workdir / f"{self.component}.log").read_text(errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def write_pidfile(self, state_dir: Path) -> None:
        """Record the process where `chaos cleanup` reaps orphans of a SIGKILLed run (chaos.faults.ledger)."""
        assert self.proc is not None
        d = state_dir / "targets"
        d.mkdir(parents=True, exist_ok=True)
        self.pidfile = d / f"monitoring-{self.component}-{self.port}.pid"
        me = os.getpid()
        self.pidfile.write_text(json.dumps({
            "target": self.component, "pid": self.proc.pid, "pgid": self.proc.pid,
            "start": _proc.start_time(self.proc.pid), "owner": {"pid": me, "start": _proc.start_time(me)}}))

    def stop(self, timeout: float = 5.0) -> None:
        proc, self.proc = self.proc, None
        _proc.terminate(proc, timeout)
        if self.pidfile is not None:
            self.pidfile.unlink(missing_ok=True)
        if self._log:
            self._log.close()
            self._log = None


class PrometheusServer(_Server):
    """A real Prometheus scraping the stack and evaluating the rule files."""

    component = "prometheus"


class AlertmanagerServer(_Server):
    """A real Alertmanager (no cluster) routing every alert to one webhook."""

    component = "alertmanager"


class EmbeddedMonitoring:
    """Prometheus (+ Alertmanager when the section has one) for an environment; `down()` stops both."""

    def __init__(self, env: Any, webhook: str | None) -> None:
        mon = env.monitoring
        if mon is None or not mon.prometheus.embedded:
            raise StackError(f"environment {env.name!r} has no embedded prometheus (monitoring.prometheus.embedded)")
        self.env, self.mon, self.webhook = env, mon, webhook
        self.workdir = Path(tempfile.mkdtemp(prefix="chaos-monitoring-"))
        self.prometheus: PrometheusServer | None = None
        self.alertmanager: AlertmanagerServer | None = None

    def up(self) -> EmbeddedMonitoring:
        try:
            am = self.mon.alertmanager
            if am is not None and am.embedded:
                if not self.webhook:
                    raise StackError("an embedded alertmanager needs the harness's webhook receiver")
                (self.workdir / "alertmanager.yml").write_text(json.dumps(
                    alertmanager_config(self.webhook, am.group_wait_s, am.group_interval_s)))
                port = free_port()
                self.alertmanager = AlertmanagerServer(
                    ["--config.file=alertmanager.yml", f"--storage.path={self.workdir / 'am-data'}",
                     f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
                    self.workdir, port, "/-/ready")
                self.alertmanager.start()
                self.alertmanager.write_pidfile(Path(self.env.state_dir))
            am_url = self.alertmanager.url if self.alertmanager else (str(am.url) if am and am.url else None)
            p = self.mon.prometheus
            (self.workdir / "prometheus.yml").write_text(json.dumps(prometheus_config(
                scrape_jobs(self.env), self.mon.rule_files, am_url, p.scrape_interval_s, p.evaluation_interval_s)))
            port = free_port()
            self.prometheus = PrometheusServer(
                ["--config.file=prometheus.yml", f"--storage.tsdb.path={self.workdir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{port}"], self.workdir, port, "/-/ready")
            self.prometheus.start()
            self.prometheus.write_pidfile(Path(self.env.state_dir))
            self._wait_scraped()
        except BaseException:
            self.down()
            raise
        return self

    def _wait_scraped(self, timeout: float = 30.0) -> None:
        """Until every scrape target has been scraped once: a fault before that leaves no trace to alert on."""
        assert self.prometheus is not None
        want = sum(len(h) for h in scrape_jobs(self.env).values())
        health: list[str] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.prometheus.url}/api/v1/targets", timeout=2.0) as r:
                    health = [t["health"] for t in json.loads(r.read())["data"]["activeTargets"]]
            except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError, KeyError):
                health = []
            if len(health) >= want and "unknown" not in health:
                return
            time.sleep(0.2)
        raise StackError(f"prometheus on {self.prometheus.url} had not scraped its {want} targets within "
                         f"{timeout:g}s (health: {health})")

    @property
    def prometheus_url(self) -> str | None:
        return self.prometheus.url if self.prometheus else None

    @property
    def alertmanager_url(self) -> str | None:
        return self.alertmanager.url if self.alertmanager else None

    def down(self) -> None:
        for server in (self.prometheus, self.alertmanager):
            if server is not None:
                server.stop()
        self.prometheus = self.alertmanager = None
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> EmbeddedMonitoring:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()


def http_ok(url: str) -> bool:
    """Whether a GET of the URL answers 200 within 2 s (any error: False)."""
    try:
        with urllib.request.urlopen(url, timeout=2.0) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError):
        return False
