"""The configs rendered for nginx and HAProxy: accepted by the real binaries, weighted as the
environment says, naming the serving pool in the env's pool header; a bad one is refused in a line."""
from __future__ import annotations

import re

import pytest

from chaos.env import load
from chaos.errors import StackError
from chaos.stack.thirdparty import gateway_command, render_haproxy, render_nginx, upstreams


def test_weights_give_the_canary_its_share():
    env = load("local-nginx")
    ups = {u.name: u for u in upstreams(env)}
    total = sum(u.weight for u in ups.values())
    canary = sum(u.weight for u in ups.values() if u.pool == "canary")
    assert abs(canary / total - env.breaker.canary_weight) < 0.01
    assert ups["replica-c"].address == "127.0.0.1:18012"  # through the replica's serve proxy (Toxiproxy)


def test_nginx_config_names_the_last_server_tried(tmp_path):
    text = render_nginx(load("local-nginx"), tmp_path)
    assert "max_fails=3 fail_timeout=10s" in text
    assert "proxy_next_upstream error timeout http_500 http_502 http_503 non_idempotent;" in text
    line = next(l for l in text.splitlines() if "canary/replica-c" in l)
    pattern = re.search(r'"~(.*)"\s', line).group(1)
    assert re.search(pattern, "127.0.0.1:18010, 127.0.0.1:18012")      # retried onto the canary: canary
    assert not re.search(pattern, "127.0.0.1:18012, 127.0.0.1:18010")  # retried off it: not the canary


def test_haproxy_config_observes_layer7(tmp_path):
    text = render_haproxy(load("local-haproxy"), tmp_path)
    assert "observe layer7 error-limit 3 on-error mark-down" in text
    assert "set-header x-served-by canary/replica-c if { srv_id 3 }" in text


def test_the_real_binary_accepts_the_config(gateway_kind, tmp_path):
    cmd = gateway_command(load(f"local-{gateway_kind}"), tmp_path)
    assert cmd[0].endswith(gateway_kind)


def test_a_config_the_gateway_refuses_is_one_line_naming_the_file(gateway_kind, tmp_path):
    env = load(f"local-{gateway_kind}")
    env.gateway.listen = "127.0.0.1:99999"  # no such port
    with pytest.raises(StackError) as e:
        gateway_command(env, tmp_path)
    msg = str(e.value)
    assert "\n" not in msg and f"gateway.kind {gateway_kind}" in msg and str(tmp_path) in msg
