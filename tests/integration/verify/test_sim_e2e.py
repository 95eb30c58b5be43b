"""End to end against the simulator: a fault from its admin API, the reference client retries
through it, and the recovery and accounting verdicts agree with the simulator's own request log."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.env.model import RetryPolicy, SLAs
from chaos.observe.completion import CompletionProber
from chaos.observe.health import HealthProber
from chaos.observe.timeline import Timeline
from chaos.resilience.client import ResilientClient
from chaos.verify.accounting import accounting_verdict, read_server_log
from chaos.verify.recovery import recovery_verdict
from tests._support import free_port

TOKEN = "test-admin"


class Sim:
    """A simulator replica process started by the test."""

    def __init__(self, port: int, log: Path) -> None:
        self.url, self.log = f"http://127.0.0.1:{port}", log
        self.proc = subprocess.Popen([sys.executable, "-m", "chaos.stack.sim", "--port", str(port), "--profile",
                                      "instant", "--request-log", str(log), "--admin-token", TOKEN],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait_ready(self, timeout_s: float = 20.0) -> None:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                pytest.fail(f"simulator exited with {self.proc.returncode}")
            try:
                if urllib.request.urlopen(self.url + "/health", timeout=0.5).status == 200:
                    return
            except OSError:
                time.sleep(0.1)
        pytest.fail("simulator not ready in time")

    def admin(self, method: str, path: str, body: dict | None = None) -> dict:
        req = urllib.request.Request(self.url + path, method=method, data=json.dumps(body).encode() if body else None,
                                     headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
        return json.loads(urllib.request.urlopen(req, timeout=5).read())

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[Sim]:
    s = Sim(free_port(), tmp_path / "requests.jsonl")
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


def test_reference_client_rides_out_a_503_fault(sim: Sim) -> None:
    tl = Timeline()
    probes = [CompletionProber(sim.url, tl, interval_s=0.1, timeout_s=1.0), HealthProber(sim.url, tl, interval_s=0.1)]
    client = ResilientClient(sim.url, RetryPolicy(max_attempts=6, deadline_s=20), timeout_s=5)
    for p in probes:
        p.start()
    try:
        assert client.chat("warm up", stream=True).ok
        t_inject = time.time()
        sim.admin("POST", "/admin/faults", {"mode": "error-rate", "fraction": 1.0, "status": 503})
        reverter = threading.Timer(1.2, lambda: sim.admin("DELETE", "/admin/faults/error-rate"))
        reverter.start()
        results = [client.chat("during the fault", stream=stream) for stream in (True, False)]
        reverter.join()
        t_revert = time.time()
        results += [client.chat(f"after {i}", stream=True) for i in range(5)]
        time.sleep(0.4)
    finally:
        for p in probes:
            p.stop()
    assert all(r.ok for r in results), [(r.outcome, [x.error for x in r.records]) for r in results]
    assert results[0].attempts > 1 and results[0].records[0].status == 503
    time.sleep(0.2)  # the simulator flushes its request log every 50 ms
    acc = accounting_verdict(client.records, read_server_log(sim.log))
    acc.assert_ok()
    assert acc.row("server_saw_success").ok and acc.row("no_hidden_attempts").ok
    rec = recovery_verdict((t_inject, t_revert), tl, client.records, SLAs(recovery_s=5.0, steady_state_s=10.0),
                           steady_window_s=1.0)
    assert rec.row("first_completion_s").ok
    # the error-rate fault leaves /health at 200: health cannot judge it, and must not "pass" it
    assert rec.row("health_back_s").ok is None and "does not see this fault" in rec.row("health_back_s").detail
    row = rec.row("fault_error_rate")
    assert row.measured == 0.0 and "0/2 logical" in row.detail  # retries hid the fault from the callers
    assert rec.data["fault_attempt_errors"] >= 2
