"""Fixtures: a backend the harness did not start as a stack (a plain `chaos sim`, no request log), and a
fault proxy in front of it with its token in a file."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.errors import StackError
from chaos.faults.base import Policy
from chaos.faults.ledger import Ledger
from chaos.faults.tokens import TokenRef
from chaos.pytest_plugin import require_component
from chaos.stack.faultproxy import FaultProxyServer, find_binary
from tests._support import free_port, hand_started_sim


def faultproxy_missing() -> str | None:
    try:
        find_binary()
    except StackError as e:
        return str(e)
    return None


@pytest.fixture(scope="session")
def faultproxy_bin() -> str:
    require_component("faultproxy", faultproxy_missing())
    return find_binary()


@pytest.fixture(scope="module")
def backend(tmp_path_factory) -> Iterator[str]:
    """A simulator started by hand, as a user would: no request log, no admin token."""
    with hand_started_sim(tmp_path_factory.mktemp("backend")) as url:
        yield url


@pytest.fixture(scope="module")
def token_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("token") / "proxy.token"
    p.write_text("tok-" + os.urandom(12).hex() + "\n")
    p.chmod(0o600)
    return p


@pytest.fixture(scope="module")
def proxy(faultproxy_bin, backend, token_file, tmp_path_factory) -> Iterator[FaultProxyServer]:
    d = tmp_path_factory.mktemp("proxy")
    server = FaultProxyServer("replica-x", f"127.0.0.1:{free_port()}", backend, TokenRef(file=str(token_file)),
                              request_log=str(d / "replica-x.proxy.jsonl"), log_path=d / "proxy.log",
                              binary=faultproxy_bin)
    with server:
        yield server


@pytest.fixture
def policy(tmp_path) -> Policy:
    return Policy(ledger=Ledger(tmp_path / "state"), verify_timeout_s=2.0)
