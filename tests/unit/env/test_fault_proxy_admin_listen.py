"""fault_proxies[].admin_listen and mirror_refusal: where the harness reaches a proxy's admin API and
log, and the one combination refused (a data port that closes with the admin API on it)."""
from __future__ import annotations

import pytest

from chaos.env import parse
from chaos.errors import ConfigError, StackError
from chaos.faults.proxy_admin import FaultProxyAdmin
from chaos.faults.tokens import TokenRef
from chaos.stack.faultproxy import FaultProxyServer

HEAD = "name: t\nendpoints: {api: 'http://127.0.0.1:1'}\n"
PROXY = "fault_proxies:\n  - {name: a, listen: '127.0.0.1:18221', upstream: 'http://127.0.0.1:18201'%s}\n"


def test_the_admin_url_is_the_admin_listener_where_there_is_one() -> None:
    plain = parse(HEAD + PROXY % "", "env.yaml", environ={}).fault_proxies[0]
    assert plain.admin_url == "http://127.0.0.1:18221" and not plain.mirror_refusal
    own = parse(HEAD + PROXY % ", admin_listen: '127.0.0.1:18321', mirror_refusal: true", "env.yaml",
                environ={}).fault_proxies[0]
    assert own.admin_url == "http://127.0.0.1:18321" and own.mirror_refusal


def test_mirror_refusal_without_an_admin_listener_is_refused() -> None:
    with pytest.raises(ConfigError, match="mirror_refusal needs admin_listen"):
        parse(HEAD + PROXY % ", mirror_refusal: true", "env.yaml", environ={})


def test_the_server_passes_the_flags_and_its_admin_client_uses_the_admin_listener(tmp_path) -> None:
    cfg = parse(HEAD + PROXY % ", admin_listen: '127.0.0.1:18321', mirror_refusal: true", "env.yaml",
                environ={}).fault_proxies[0]
    server = FaultProxyServer.for_config(cfg, TokenRef(env="CHAOS_PROXY_TOKEN"), tmp_path)
    server.binary = "/bin/chaos-faultproxy"
    cmd = server.command()
    assert cmd[cmd.index("--admin-listen") + 1] == "127.0.0.1:18321" and "--mirror-refusal" in cmd
    assert server.url == "http://127.0.0.1:18221" and server.admin_url == "http://127.0.0.1:18321"
    assert FaultProxyAdmin.of(server).url == "http://127.0.0.1:18321"
    plain = FaultProxyServer("b", "127.0.0.1:18222", "http://127.0.0.1:18202", TokenRef(env="X"), binary="/bin/fp")
    assert "--admin-listen" not in plain.command() and "--mirror-refusal" not in plain.command()
    assert FaultProxyAdmin.of(plain).url == plain.url
    with pytest.raises(StackError, match="mirror_refusal needs admin_listen"):
        FaultProxyServer("c", "127.0.0.1:18223", "http://127.0.0.1:18203", TokenRef(env="X"), mirror_refusal=True)
