"""`chaos env check [--probe]`: the suite plan (run / skip and why / refused) and the probe of every
part an environment names, against real local servers and a real Toxiproxy."""
from __future__ import annotations

import http.server
import re
import threading
from pathlib import Path

import pytest

from chaos.env import load, parse
from chaos.env_check import probe
from chaos.experiment.suite_plan import AT_RUN_TIME, REFUSED, RUN, SKIP, client_proxy, plan
from tests._support import free_port
from tests.integration.cli.test_cli import chaos
from tests.integration.faults.conftest import toxiproxy_server  # noqa: F401  (the real server; skips without it)


def _rows(env, **kw):
    return {(r.suite, r.what): r for r in plan(env, allow_destructive=kw.get("allow", False))}


def _row(rows, suite: str, starts: str):
    return next(r for (s, w), r in rows.items() if s == suite and w.startswith(starts))


def test_plan_names_the_real_limits_of_local_vllm() -> None:
    env = load("local-vllm", environ={})
    rows = _rows(env)
    assert _row(rows, "recovery", "NCCL rank-link cut").verdict == SKIP
    assert "shared memory" in _row(rows, "recovery", "NCCL rank-link cut").reason
    assert _row(rows, "recovery", "NCCL rank freeze").verdict == RUN
    # the engine plugin (vllm.engine_faults, on for every replica) plays what only the simulator could
    assert _row(rows, "breaker", "leak trend").verdict == RUN
    assert _row(rows, "inputs", "tokenizer crash").verdict == RUN
    hang = _row(rows, "recovery", "NCCL timeout: all-reduce hung")
    assert hang.verdict == RUN and hang.target == "replica-a", hang  # the TP 2 replica only
    # without it they skip, saying why
    for t in env.targets:
        assert t.vllm is not None
        t.vllm.engine_faults = False
    off = _rows(env)
    assert _row(off, "breaker", "leak trend").verdict == SKIP and "engine plugin" in _row(off, "breaker", "leak").reason
    assert _row(off, "inputs", "tokenizer crash").verdict == SKIP
    hang = _row(off, "recovery", "NCCL timeout: all-reduce hung")
    assert hang.verdict == SKIP and "vllm.engine_faults: true" in hang.reason, hang
    local = _rows(load("local", environ={}))
    # signing is judged only at an API that declares it (breaker.hmac_key_env); local's gateway does not
    signing = _row(local, "routing", "unsigned, tampered")
    assert signing.verdict == SKIP and "sets no breaker.hmac_key_env" in signing.reason, signing
    # and the all-reduce hang is the engine plugin's, inside real vLLM (the rank freeze plays it on the simulator)
    hang = _row(local, "recovery", "NCCL timeout: all-reduce hung")
    assert hang.verdict == SKIP and "the rank freeze plays it elsewhere" in hang.reason, hang
    skipped = [r for r in local.values() if r.verdict == SKIP and r not in (signing, hang)]
    assert not skipped, skipped
    # both have their load baselines committed: the regression check is known to run
    assert _row(rows, "load", "7:2:1 mix").verdict == RUN and _row(local, "load", "7:2:1 mix").verdict == RUN


def test_a_third_party_gateway_without_an_admin_api_is_judged_from_the_fault_proxies() -> None:
    for name in ("local-nginx", "local-haproxy", "local-litellm"):
        rows = _rows(load(name, environ={}))
        assert _row(rows, "breaker", "degrade").verdict != SKIP, name
        assert _row(rows, "routing", "misrouting").verdict == SKIP  # a fault planted in our gateway only


def test_the_lab_plan_runs_the_defects_planted_from_inside_the_remote_containers() -> None:
    """The lab's simulators run in containers on another host: their admin API (loopback-only there) takes
    the leak and the tokenizer defect from inside each container, so the plan runs both; simulator
    processes at the same addresses have no such path, and the plan says so instead of a 403."""
    lab = load("lab", environ={})
    rows = _rows(lab, allow=True)
    for suite, what in (("breaker", "leak trend"), ("inputs", "tokenizer crash")):
        assert _row(rows, suite, what).verdict == RUN, _row(rows, suite, what)
    lab.targets = [t.model_copy(update={"kind": "process"}) for t in lab.targets]
    rows = _rows(lab, allow=True)
    for suite, what in (("breaker", "leak trend"), ("inputs", "tokenizer crash")):
        row = _row(rows, suite, what)
        assert row.verdict == SKIP and "loopback" in row.reason and "replica-c run(s) on another host as a process" \
            in row.reason, row
    assert _row(rows, "recovery", "NCCL rank freeze").verdict == RUN
    assert _row(rows, "network", "client-path").verdict == RUN


MINIMAL = """
name: bare
endpoints: {{api: "{api}"}}
safety: {{protected: {protected}}}
targets:
  - {{name: gpu-1, kind: docker, host: 127.0.0.1, port: 8000, image: vllm/vllm-openai, docker_host: "{docker}"}}
{extra}
"""


def _env(tmp_path: Path, *, api="http://127.0.0.1:9", protected="false", docker="unix:///nonexistent.sock", extra=""):
    p = tmp_path / "bare.yaml"
    p.write_text(MINIMAL.format(api=api, protected=protected, docker=docker, extra=extra))
    return parse(p.read_text(), p, {})


def test_plan_skips_say_what_is_missing_and_protected_refuses_destructive(tmp_path) -> None:
    rows = _rows(_env(tmp_path, protected="true"))
    assert _row(rows, "network", "client-path").reason == "environment bare has no Toxiproxy"
    assert _row(rows, "streams", "SSE").reason == "environment bare has no fault proxies in front of its replicas"
    assert _row(rows, "breaker", "degrade").reason == ("no fault proxy in front of replica gpu-1 and no gateway "
                                                       "admin endpoint: nothing says which replica served each request")
    assert _row(rows, "recovery", "GPU driver reset").verdict == REFUSED
    assert "--allow-destructive" in _row(rows, "recovery", "GPU driver reset").reason
    assert _row(rows, "recovery", "NCCL rank freeze").verdict == SKIP  # TP 1: skipped before refused
    allowed = _rows(_env(tmp_path, protected="true"), allow=True)
    assert _row(allowed, "recovery", "GPU driver reset").verdict == RUN
    load_row = _row(rows, "load", "7:2:1 mix")
    assert load_row.verdict == AT_RUN_TIME and "mix-7-2-1, burst-100x32k" in load_row.reason


def test_the_client_proxy_is_found_for_an_api_url_without_a_port(tmp_path) -> None:
    # before, the network suite matched the API URL's text after its last ':' and skipped here
    toxi = ('toxiproxy: {api: "http://127.0.0.1:8474", proxies: [{name: edge, listen: "0.0.0.0:80", '
            'upstream: "10.0.0.5:8000"}]}')
    assert client_proxy(_env(tmp_path, api="http://gateway.staging.internal", extra=toxi)) == "edge"
    assert client_proxy(_env(tmp_path, api="https://gateway.staging.internal", extra=toxi)) is None
    named = toxi.replace("name: edge", "name: client").replace("0.0.0.0:80", "0.0.0.0:9999")
    assert client_proxy(_env(tmp_path, api="https://gateway.staging.internal", extra=named)) == "client"


class _Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"object": "list", "data": [{"id": "sim-model", "object": "model"}]}')

    def log_message(self, *a) -> None:
        pass


@pytest.fixture
def api_server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _Ok)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_probe_reports_each_failure_in_one_line_naming_the_host(tmp_path, api_server) -> None:
    dead = free_port()
    extra = (f'fault_proxies: [{{name: fp-1, listen: "127.0.0.1:{dead}", upstream: "http://127.0.0.1:8000"}}]')
    env = _env(tmp_path, api=api_server, extra=extra)
    results = {p.what: p for p in probe(env, timeout=1.0)}
    assert results["api endpoint"].ok and results["api endpoint"].detail == "lists 'sim-model'"
    assert not results["fault proxy fp-1"].ok and "Connection refused" in results["fault proxy fp-1"].detail
    assert not results["docker engine"].ok and results["docker engine"].address == "unix:///nonexistent.sock"
    r = chaos("env", "check", "--env", str(tmp_path / "bare.yaml"), "--probe", "--timeout", "1")
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert any(l.startswith("ok    api endpoint: " + api_server) for l in lines), lines
    fails = [l for l in lines if l.startswith("FAIL")]
    assert {l.split(":")[0] for l in fails} == {"FAIL  fault proxy fp-1", "FAIL  replica gpu-1", "FAIL  docker engine"}
    assert any("nonexistent.sock" in l for l in fails if "docker engine" in l)
    assert re.search(r"^suite +scenarios", r.stdout, re.M)  # the plan follows the probe


def test_probe_finds_a_proxy_missing_from_a_real_toxiproxy(tmp_path, api_server, toxiproxy_server) -> None:  # noqa: F811 - the fixture
    toxiproxy_server.client().create_proxy("present", f"127.0.0.1:{free_port()}", "127.0.0.1:9")
    extra = (f'toxiproxy: {{api: "{toxiproxy_server.api}", proxies: ['
             f'{{name: present, listen: "127.0.0.1:1", upstream: "127.0.0.1:9"}}, '
             f'{{name: absent, listen: "127.0.0.1:2", upstream: "127.0.0.1:9"}}]}}')
    results = {p.what: p for p in probe(_env(tmp_path, api=api_server, extra=extra), timeout=2.0)}
    assert results["toxiproxy"].ok
    assert results["toxiproxy proxy present"].ok
    assert not results["toxiproxy proxy absent"].ok and toxiproxy_server.api in results["toxiproxy proxy absent"].detail


def test_probe_says_which_load_host_cannot_be_reached_and_why(tmp_path, api_server) -> None:
    # a real ssh to a port nothing listens on (127.0.0.1): the worker host's line says so; the lab's
    # tests/standins/lab/test_load_hosts.py covers a refused key and a host without the harness
    dead = free_port()
    env = _env(tmp_path, api=api_server, extra=f'load: {{workers: 2, worker_host: "ssh://root@127.0.0.1:{dead}"}}')
    results = {p.what: p for p in probe(env, timeout=2.0)}
    host = results["load host"]
    assert not host.ok and host.address == f"ssh://root@127.0.0.1:{dead}"
    assert "Connection refused" in host.detail and "\n" not in host.detail, host.detail
    local = _env(tmp_path, api=api_server, extra="load: {workers: 2}")
    assert "load host" not in {p.what for p in probe(local, timeout=1.0)}, "workers here: nothing to reach"
