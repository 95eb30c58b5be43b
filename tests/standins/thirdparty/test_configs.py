"""The configs rendered for nginx, HAProxy and LiteLLM: accepted by the real binaries, weighted as the
environment says, naming the serving pool in the env's pool header; a bad one is refused in a line."""
from __future__ import annotations

import re

import pytest
import yaml

from chaos.env import load
from chaos.errors import StackError
from chaos.stack.thirdparty import gateway_process, render_haproxy, render_litellm, render_nginx, upstreams


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


def test_litellm_config_is_one_group_with_a_deployment_per_replica():
    env = load("local-litellm")
    config = yaml.safe_load(render_litellm(env))
    ids = {d["model_info"]["id"]: d for d in config["model_list"]}
    assert sorted(ids) == ["canary/replica-c", "stable/replica-a", "stable/replica-b"]
    assert {d["model_name"] for d in ids.values()} == {env.endpoints.model}
    assert ids["canary/replica-c"]["litellm_params"]["api_base"] == "http://127.0.0.1:18012/v1"  # its serve proxy
    weights = {k: d["litellm_params"]["weight"] for k, d in ids.items()}
    assert abs(weights["canary/replica-c"] / sum(weights.values()) - env.breaker.canary_weight) < 0.01
    assert config["router_settings"] == {"routing_strategy": "simple-shuffle", "num_retries": 2, "allowed_fails": 1,
                                         "cooldown_time": 30.0, "timeout": 300.0}
    assert config["general_settings"]["master_key"] == env.endpoints.api_key
    assert env.breaker.pool_header == "x-litellm-model-id"  # LiteLLM returns model_info.id there


def test_litellm_without_a_master_key_is_refused_in_a_line(tmp_path):
    env = load("local-litellm")
    env.endpoints.api_key = None
    with pytest.raises(StackError, match=r"^gateway.kind litellm: endpoints.api_key: expected the proxy's master key"):
        gateway_process(env, tmp_path)


def test_the_real_binary_accepts_the_config(checked_gateway_kind, tmp_path):
    spec = gateway_process(load(f"local-{checked_gateway_kind}"), tmp_path)
    assert spec.command[0].endswith(checked_gateway_kind)


def test_a_config_the_gateway_refuses_is_one_line_naming_the_file(checked_gateway_kind, tmp_path):
    env = load(f"local-{checked_gateway_kind}")
    env.gateway.listen = "127.0.0.1:99999"  # no such port
    with pytest.raises(StackError) as e:
        gateway_process(env, tmp_path)
    msg = str(e.value)
    assert "\n" not in msg and f"gateway.kind {checked_gateway_kind}" in msg and str(tmp_path) in msg
