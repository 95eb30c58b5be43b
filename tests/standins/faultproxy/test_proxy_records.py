"""The replica side's truth on any backend: the proxy's request log feeds accounting; a SIGKILLed run's
rules are removed by `chaos cleanup`; no token reaches any file a run wrote."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import yaml

from chaos.env import load
from chaos.env.model import RetryPolicy
from chaos.faults import http as H
from chaos.faults.ledger import cleanup
from chaos.faults.proxy_admin import FaultProxyAdmin
from chaos.faults.tokens import TokenRef
from chaos.resilience.client import ResilientClient
from chaos.verify.accounting import accounting_verdict, server_log_for
from chaos.verify.secrets import env_secrets, scan, token_files
from tests._support import REPO, free_port


def _env_file(tmp_path: Path, proxy, token_file: Path) -> Path:
    """A remote-style environment (not embedded) that names the proxy a user started by hand."""
    env = {"name": "byhand", "embedded": "none", "state_dir": str(tmp_path / "state"),
           "endpoints": {"api": proxy.url, "model": "sim-model"},
           "fault_proxies": [{"name": "replica-x", "listen": proxy.listen, "upstream": proxy.upstream,
                              "token_file": str(token_file)}]}
    p = tmp_path / "byhand.yaml"
    p.write_text(yaml.safe_dump(env))
    return p


def test_a_request_that_succeeded_at_the_replica_is_not_counted_lost(proxy, tmp_path, policy, token_file):
    env = load(str(_env_file(tmp_path, proxy, token_file)))
    t0 = time.time()
    client = ResilientClient(proxy.url, RetryPolicy(max_attempts=1), model="sim-model", timeout_s=10)
    results = [client.chat("hello", stream=i % 2 == 0, max_tokens=4) for i in range(6)]
    with H.stream_cut(FaultProxyAdmin.of(proxy), after_tokens=1).using(policy):
        results.append(client.chat("hello", stream=True, max_tokens=4))
    # read over HTTP from the proxy (GET /_chaos/log), this test's window only: no file is copied or globbed
    server = server_log_for(env, since=t0, until=time.time() + 1)
    assert not [p for p in (tmp_path / "state").glob("*.jsonl") if p.name != "faults.jsonl"]  # only the ledger
    assert server.source == "fault proxy" and len(server.rows) == 7, server
    rows = {r["request_id"]: r for r in server.rows}
    ok = [r for r in results if r.ok]
    assert len(ok) == 6 and all(rows[r.request_id]["outcome"] in ("stop", "length") for r in ok)
    cut = rows[results[-1].request_id]
    assert cut["outcome"] == "error" and cut["rule"].startswith("chaos-cut") and cut["output_tokens"] == 1
    assert all(r["replica"] == "replica-x" and r["t_first_token"] for r in rows.values())
    v = accounting_verdict(client.records, server)
    assert v.row("server_saw_success").ok and v.row("server_side").measured == "fault proxy", v.rows
    # the same records against an empty replica side: client-side only, not a failure
    none = accounting_verdict(client.records, server_log_for(type("E", (), {"state_dir": str(tmp_path / "x")})()))
    assert none.row("server_side").measured == "client-side only" and none.ok
    # the proxy gone: not proven, naming it, and not green
    gone = env.model_copy(update={"fault_proxies": [env.fault_proxies[0].model_copy(
        update={"listen": f"127.0.0.1:{free_port()}"})]})
    row = accounting_verdict(client.records, server_log_for(gone)).row("server_side")
    assert row.ok is False and row.detail.startswith("not proven: fault proxy replica-x: not answering"), row
    # and a success the replica side never served is caught
    server.rows = [r for r in server.rows if r["request_id"] != ok[0].request_id]
    assert not accounting_verdict(client.records, server).row("server_saw_success").ok


HARNESS = textwrap.dedent("""
    import os, sys, time
    from chaos.env import load
    from chaos.faults import http as H
    from chaos.faults.base import Policy
    from chaos.faults.proxy_admin import admins_for
    env = load(sys.argv[1])
    f = H.http_error(admins_for(env)["replica-x"], 503).using(Policy.for_env(env))
    f.inject()
    print("injected", flush=True)
    time.sleep(60)
""")


def test_cleanup_removes_the_rules_of_a_sigkilled_run_and_no_token_is_written(proxy, tmp_path, token_file):
    envfile = _env_file(tmp_path, proxy, token_file)
    env = load(str(envfile))
    proc = subprocess.Popen([sys.executable, "-c", HARNESS, str(envfile)], stdout=subprocess.PIPE, text=True,
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert proc.stdout.readline().strip() == "injected"
        admin = FaultProxyAdmin(proxy.url, TokenRef(file=str(token_file)))
        assert [r["kind"] for r in admin.rules()] == ["abort"]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        proc.kill()
    assert [r["kind"] for r in admin.rules()] == ["abort"]  # SIGKILL: nothing reverted it
    done = cleanup(env)
    assert any("DELETE" in d and "_chaos/rules/chaos-abort" in d for d in done), done
    assert admin.rules() == []
    assert cleanup(env) == [] or all("swept" not in d for d in cleanup(env))
    held = env_secrets(env)
    assert held == {"fault_proxies.replica-x": token_file.read_text().strip()}
    found = scan([tmp_path], held, exclude=token_files(env))
    assert found.scanned >= 2 and found.hits == [], found.hits  # the ledger, the env file, the records
    ledger = (Path(env.state_dir) / "faults.jsonl").read_text()
    assert json.loads(ledger.splitlines()[0])["undo"][0]["auth"] == {"file": str(token_file)}
