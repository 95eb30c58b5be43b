"""As a user would: `chaos proxy` in front of a server started by hand, then `chaos fault inject` through it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from chaos.env import load
from chaos.faults.proxy_admin import FaultProxyAdmin
from chaos.faults.tokens import TokenRef
from chaos.verify.accounting import server_log_for
from tests._support import free_port
from tests.standins.faultproxy.test_http_faults import call

CHAOS = [sys.executable, "-m", "chaos.cli"]


def _wait(admin: FaultProxyAdmin, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not admin.ping():
        assert time.monotonic() < deadline, "chaos proxy did not come up"
        time.sleep(0.1)


def test_chaos_proxy_and_fault_inject_against_a_server_started_by_hand(faultproxy_bin, backend, tmp_path):
    listen = f"127.0.0.1:{free_port()}"
    state = tmp_path / "state"
    proc = subprocess.Popen([*CHAOS, "proxy", "--listen", listen, "--upstream", backend, "--name", "mine",
                             "--state-dir", str(state)],
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={k: v for k, v in os.environ.items() if k != "CHAOS_PROXY_TOKEN"})
    try:
        token_line = proc.stderr.readline()
        token_file = token_line.split(" in ", 1)[1].split(" ", 1)[0]
        assert Path(token_file).stat().st_mode & 0o077 == 0  # 0600: the token is nobody else's
        admin = FaultProxyAdmin(f"http://{listen}", TokenRef(file=token_file))
        _wait(admin)
        envfile = tmp_path / "mine.yaml"
        envfile.write_text(yaml.safe_dump({
            "name": "mine", "state_dir": str(state), "endpoints": {"api": f"http://{listen}", "model": "sim-model"},
            "fault_proxies": [{"name": "mine", "listen": listen, "upstream": backend, "token_file": token_file}]}))
        statuses: list[int | None] = []
        stop = threading.Event()

        def traffic() -> None:
            while not stop.is_set():
                statuses.append(call(f"http://{listen}", stream=False)[0])
                time.sleep(0.05)

        t = threading.Thread(target=traffic)
        t.start()
        try:
            out = subprocess.run([*CHAOS, "fault", "inject", "http-error", "--env", str(envfile), "--proxy", "mine",
                                  "--param", "status=503", "--param", "fraction=0.5", "--duration", "1.5"],
                                 capture_output=True, text=True, timeout=60)
        finally:
            stop.set()
            t.join(10)
        assert out.returncode == 0, out.stdout + out.stderr
        record = json.loads(out.stdout.splitlines()[0])
        assert record["kind"] == "http-abort" and record["params"]["token"] == {"file": token_file}
        assert 503 in statuses and 200 in statuses
        assert admin.rules() == []  # reverted
        # the request log is on by default and served over HTTP: the fault's 503s are the replica side's truth
        assert "request log in " + str(state / "mine.proxy.jsonl") in proc.stderr.readline()
        served = server_log_for(load(str(envfile)))
        assert served.source == "fault proxy" and len(served.rows) >= len(statuses) - 1, served.unproven
        assert {r["status"] for r in served.rows} == {200, 503} and {r["replica"] for r in served.rows} == {"mine"}
        assert call(f"http://{listen}", stream=False)[0] == 200
        bad = subprocess.run([*CHAOS, "fault", "inject", "stream-cut", "--env", str(envfile), "--proxy", "mine",
                              "--param", "after_tokens=-1", "--duration", "0.1"], capture_output=True, text=True,
                             timeout=60)
        assert bad.returncode != 0 and "after_tokens" in bad.stderr and "Traceback" not in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
