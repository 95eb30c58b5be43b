"""`chaos env check --probe` checks identity, not reachability: a static file server answers HTTP
but is neither the API, a fault proxy, a replica, Toxiproxy, a gateway admin nor a DCGM exporter;
a fault proxy with the wrong token fails; real parts pass; a container must exist with the restart
policy the file claims. All against real processes on 127.0.0.1 and the real Docker engine."""
from __future__ import annotations

import http.server
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from chaos.env import parse
from chaos.env_check import probe
from tests._support import free_port, require
from tests.integration.cli.test_cli import chaos
from tests.integration.faults.conftest import toxiproxy_server  # noqa: F401  (the real server; skips without it)
from tests.standins.faultproxy.conftest import backend, faultproxy_bin, proxy, token_file  # noqa: F401  (real sim + proxy)

SIM_IMAGE = "llm-chaos-sim:latest"


def _listening(port: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.05)
    return False


@pytest.fixture
def static_server(tmp_path):
    """`python -m http.server` on 127.0.0.1: answers every GET, 404 for what it has no file for."""
    www = tmp_path / "www"
    www.mkdir()
    (www / "index.html").write_text("<html><body>hello</body></html>\n")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory",
                             str(www)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert _listening(port), "python -m http.server did not start"
        yield www, f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "probe.yaml"
    p.write_text(text)
    return p


def test_a_static_file_server_is_none_of_the_parts(tmp_path, static_server) -> None:
    www, hp = static_server
    port = hp.rsplit(":", 1)[1]
    path = _write(tmp_path, f"""name: static
endpoints: {{api: "http://{hp}", gateway_admin: "http://{hp}"}}
toxiproxy: {{api: "http://{hp}", proxies: [{{name: client, listen: "127.0.0.1:1", upstream: "127.0.0.1:2"}}]}}
fault_proxies: [{{name: fp-1, listen: "{hp}", upstream: "http://{hp}", token_env: PROBE_TEST_TOKEN}}]
targets: [{{name: replica-1, kind: process, host: 127.0.0.1, port: {port}, command: [x], fault_proxy: fp-1}}]
telemetry: {{dcgm_url: "http://{hp}"}}
""")
    r = chaos("env", "check", "--env", str(path), "--probe", "--timeout", "3", env={"PROBE_TEST_TOKEN": "t"})
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "Traceback" not in out, out
    lines = {line.split(":")[0]: line for line in r.stdout.splitlines() if line.startswith(("ok ", "FAIL"))}
    assert set(lines) == {f"FAIL  {part}" for part in ("api endpoint", "gateway admin", "toxiproxy", "fault proxy fp-1",
                                                       "replica replica-1", "dcgm exporter")}, out
    # each line says what was expected and shows the server did answer (identity failed, not reachability)
    expected = {"api endpoint": "expected /v1/models listing model 'sim-model'",
                "gateway admin": "expected Prometheus metrics on /metrics with chaos_gateway_pool_state",
                "toxiproxy": "expected Toxiproxy's GET /proxies", "fault proxy fp-1": "expected the fault proxy's GET "
                "/_chaos/health", "replica replica-1": "expected /health 200", "dcgm exporter": "expected DCGM metrics"}
    for part, words in expected.items():
        assert words in lines[f"FAIL  {part}"] and "got HTTP 404" in lines[f"FAIL  {part}"], lines[f"FAIL  {part}"]
    # a file that looks like a model list is read for its models: the configured one must be there
    (www / "v1").mkdir()
    (www / "v1" / "models").write_text('{"object": "list", "data": [{"id": "other-model", "object": "model"}]}')
    env = parse(path.read_text(), path, {})
    api = next(p for p in probe(env, timeout=3.0) if p.what == "api endpoint")
    assert not api.ok and api.detail.endswith("it lists 'other-model'"), api


def _real_env(tmp_path: Path, *, backend: str, proxy_listen: str, token_source: str, toxi: str) -> Path:  # noqa: F811
    port = backend.rsplit(":", 1)[1]
    return _write(tmp_path, f"""name: real
endpoints: {{api: "{backend}", model: sim-model}}
toxiproxy: {{api: "{toxi}", proxies: [{{name: client, listen: "127.0.0.1:1", upstream: "127.0.0.1:{port}"}}]}}
fault_proxies: [{{name: replica-x, listen: "{proxy_listen}", upstream: "{backend}", {token_source}}}]
targets: [{{name: replica-x, kind: process, host: 127.0.0.1, port: {port}, command: [x], fault_proxy: replica-x}}]
""")


def test_real_parts_pass_and_a_wrong_proxy_token_fails(tmp_path, backend, proxy, token_file,  # noqa: F811
                                                       toxiproxy_server) -> None:  # noqa: F811
    toxiproxy_server.client().create_proxy("client", f"127.0.0.1:{free_port()}", backend.removeprefix("http://"))
    good = _real_env(tmp_path, backend=backend, proxy_listen=proxy.listen, token_source=f"token_file: '{token_file}'",
                     toxi=toxiproxy_server.api)
    results = {p.what: p for p in probe(parse(good.read_text(), good, {}), timeout=3.0)}
    assert set(results) == {"api endpoint", "toxiproxy", "toxiproxy proxy client", "fault proxy replica-x",
                            "replica replica-x"}
    assert all(p.ok for p in results.values()), [p for p in results.values() if not p.ok]
    assert "accepted" in results["fault proxy replica-x"].detail
    r = chaos("env", "check", "--env", str(good), "--probe", "--timeout", "3")
    assert r.returncode == 0 and not any(line.startswith("FAIL") for line in r.stdout.splitlines()), r.stdout + r.stderr

    wrong = tmp_path / "wrong.token"
    wrong.write_text("not-the-token\n")
    bad = _real_env(tmp_path, backend=backend, proxy_listen=proxy.listen, token_source=f"token_file: '{wrong}'",
                    toxi=toxiproxy_server.api)
    fp = next(p for p in probe(parse(bad.read_text(), bad, {}), timeout=3.0) if p.what == "fault proxy replica-x")
    assert not fp.ok and f"accept the token from {wrong}" in fp.detail and "HTTP 401" in fp.detail, fp
    unset = _real_env(tmp_path, backend=backend, proxy_listen=proxy.listen, token_source="token_env: PROBE_UNSET_TOKEN",
                      toxi=toxiproxy_server.api)
    fp = next(p for p in probe(parse(unset.read_text(), unset, {}), timeout=3.0) if p.what == "fault proxy replica-x")
    assert not fp.ok and "PROBE_UNSET_TOKEN is not set" in fp.detail, fp


class _Dcgm(http.server.BaseHTTPRequestHandler):
    body = b'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-1"} 2048\n'

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200 if self.path == "/metrics" else 404)
        self.end_headers()
        self.wfile.write(self.body if self.path == "/metrics" else b"")

    def log_message(self, *a) -> None:
        pass


def test_a_dcgm_exporter_passes_by_its_series(tmp_path) -> None:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _Dcgm)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}"
        path = _write(tmp_path, f"name: d\nendpoints: {{api: 'http://127.0.0.1:9'}}\ntelemetry: {{dcgm_url: '{url}'}}\n")
        dcgm = next(p for p in probe(parse(path.read_text(), path, {}), timeout=2.0) if p.what == "dcgm exporter")
        assert dcgm.ok, dcgm
    finally:
        srv.shutdown()


def test_a_container_must_exist_with_the_restart_policy_the_file_claims(tmp_path) -> None:
    require(f"image:{SIM_IMAGE}")
    import docker

    client = docker.from_env()
    name = f"chaos-probe-test-{uuid.uuid4().hex[:8]}"
    # created, never started: existence and HostConfig are what the probe reads
    client.containers.create(SIM_IMAGE, command=["true"], name=name, restart_policy={"Name": "unless-stopped"},
                             labels={"llm-chaos.test": "env-probe"})
    try:
        targets = "\n".join(
            f"  - {{name: {t}, kind: docker, image: {SIM_IMAGE}, port: 9, container_name: {c}, "
            f"restart_policy: {policy}}}"
            for t, c, policy in (("right", name, "unless-stopped"), ("wrong", name, "always"),
                                 ("gone", name + "-gone", "always")))
        path = _write(tmp_path, f"name: dk\nendpoints: {{api: 'http://127.0.0.1:9'}}\ntargets:\n{targets}\n")
        results = {p.what: p for p in probe(parse(path.read_text(), path, {}), timeout=5.0)}
        assert results["docker engine"].ok, results["docker engine"]
        assert results["container of right"].ok and "unless-stopped" in results["container of right"].detail
        wrong = results["container of wrong"]
        assert not wrong.ok and "restart policy 'always'" in wrong.detail and "has 'unless-stopped'" in wrong.detail
        gone = results["container of gone"]
        assert not gone.ok and f"{name}-gone" in gone.detail and "no container by that name" in gone.detail
    finally:
        client.containers.get(name).remove(force=True)


def test_a_team_gateways_metrics_page_must_serve_the_state_metric(tmp_path, static_server) -> None:
    www, hp = static_server
    (www / "prom").write_text('# TYPE team_pool_state gauge\nteam_pool_state{pool="canary"} 0\n')

    def gateway_metrics(page: str, metric: str):
        path = _write(tmp_path, f"""name: team
endpoints: {{api: "http://{hp}", gateway_metrics: "http://{hp}/{page}"}}
breaker: {{state_metric: {metric}}}
targets: []
""")
        return next(p for p in probe(parse(path.read_text(), path, {}), timeout=3.0) if p.what == "gateway metrics")

    assert gateway_metrics("prom", "team_pool_state").ok
    missing = gateway_metrics("prom", "other_pool_state")
    assert not missing.ok and missing.detail == ("expected Prometheus metrics on that page with other_pool_state; "
                                                 "got HTTP 200 without other_pool_state"), missing
    gone = gateway_metrics("nothing", "team_pool_state")
    assert not gone.ok and "got HTTP 404" in gone.detail, gone
