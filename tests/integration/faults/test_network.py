"""Network faults against a real toxiproxy-server: the toxic is listed and a probe measures it."""
from __future__ import annotations

import socket
import time

import pytest

from chaos.errors import FaultError, FaultNotEffective, SafetyError
from chaos.faults import down, jitter, latency, limit_data, rank_link_cut, reset_peer, timeout
from chaos.faults.ledger import Ledger
from chaos.faults.probe import probe
from tests._support import free_port


def _get(listen: str, window: float = 5.0):
    return probe(listen, window_s=window)


def test_latency_really_delays_by_at_least_the_configured_ms(toxiproxy_server, proxy, policy):
    name, listen = proxy
    base = _get(listen)
    assert base.answered()
    with latency(toxiproxy_server.api, name, latency=400).using(policy) as f:
        during = _get(listen)
        assert f.evidence["listed"]
    after = _get(listen)
    assert during.ttfb_s is not None and during.ttfb_s >= 0.4
    assert after.ttfb_s is not None and after.ttfb_s < 0.4
    assert toxiproxy_server.client().toxics(name) == []


def test_reset_peer_really_resets(toxiproxy_server, proxy, policy):
    name, listen = proxy
    with reset_peer(toxiproxy_server.api, name).using(policy):
        host, port = listen.split(":")
        s = socket.create_connection((host, int(port)), timeout=3)
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        with pytest.raises(ConnectionResetError):
            for _ in range(10):
                if not s.recv(1024):
                    break
        s.close()
    assert _get(listen).answered()


def test_timeout_down_and_limit_data_are_proven_and_reverted(toxiproxy_server, proxy, policy):
    name, listen = proxy
    for fault in (timeout(toxiproxy_server.api, name), down(toxiproxy_server.api, name),
                  limit_data(toxiproxy_server.api, name, bytes=100)):
        with fault.using(policy):
            assert fault.evidence.get("probe"), fault
        assert _get(listen).nbytes > 4096
    assert toxiproxy_server.client().toxics(name) == []
    assert toxiproxy_server.client().proxy(name)["enabled"] is True


def test_ledger_records_before_and_done_after(toxiproxy_server, proxy, policy):
    name, _ = proxy
    f = latency(toxiproxy_server.api, name, latency=100).using(policy)
    f.inject()
    ledger: Ledger = policy.ledger
    (rec,) = ledger.outstanding()
    assert rec["undo"][0] == {"kind": "toxic", "api": toxiproxy_server.api, "proxy": name, "toxic": f.toxic_names["downstream"]}
    f.revert()
    assert ledger.outstanding() == []
    assert [r["op"] for r in ledger.records()] == ["inject", "done"]


def test_control_probe_through_the_wrong_proxy_fails_loudly(toxiproxy_server, proxy, upstream, policy):
    """The toxic goes on one proxy while traffic flows through another: it must not pass silently."""
    name, _ = proxy
    f = latency(toxiproxy_server.api, name, latency=500, probe_via=upstream).using(policy, verify_timeout_s=0.5)
    with pytest.raises(FaultNotEffective, match="shows no effect"):
        f.inject()
    assert toxiproxy_server.client().toxics(name) == []  # reverted on the way out
    assert policy.ledger.outstanding() == []


def test_unknown_proxy_and_dead_api_error_before_anything(toxiproxy_server, policy, tmp_path):
    with pytest.raises(FaultError, match="no proxy 'nope'"):
        latency(toxiproxy_server.api, "nope").using(policy).inject()
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(FaultError, match="not answering"):
        latency(dead, "x").using(policy).inject()
    assert not policy.ledger.path.exists()


def test_dry_run_touches_nothing_and_destructive_is_refused_when_protected(toxiproxy_server, proxy, policy):
    name, _ = proxy
    plan = rank_link_cut(toxiproxy_server.api, name).using(policy, dry_run=True).inject()
    assert plan["dry_run"] and len(plan["undo"]) == 2
    assert toxiproxy_server.client().toxics(name) == []
    with pytest.raises(SafetyError):
        rank_link_cut(toxiproxy_server.api, name).using(policy, protected=True).inject()
    with rank_link_cut(toxiproxy_server.api, name).using(policy, protected=True, allow_destructive=True):
        assert len(toxiproxy_server.client().toxics(name)) == 2
    assert toxiproxy_server.client().toxics(name) == []


def test_combined_faults_all_or_nothing_and_reverted_on_exception(toxiproxy_server, proxy, policy):
    name, _ = proxy
    combo = latency(toxiproxy_server.api, name, latency=50) & jitter(toxiproxy_server.api, name, stream="upstream",
                                                                     latency=60, jitter=10)
    with pytest.raises(RuntimeError):
        with combo.using(policy):
            assert len(toxiproxy_server.client().toxics(name)) == 2
            raise RuntimeError("boom")
    assert toxiproxy_server.client().toxics(name) == []
    bad = latency(toxiproxy_server.api, name, latency=50) & latency(toxiproxy_server.api, "missing")
    with pytest.raises(FaultError):
        bad.using(policy).inject()
    assert toxiproxy_server.client().toxics(name) == []


def test_schedule_injects_after_delay_and_reverts_after_duration(toxiproxy_server, proxy, policy):
    name, _ = proxy
    f = latency(toxiproxy_server.api, name, latency=50, seed=7).using(policy)
    assert f.describe()["seed"] == 7
    sched = f.after(0.2).lasting(0.6).start()
    time.sleep(0.1)
    assert toxiproxy_server.client().toxics(name) == []
    deadline = time.monotonic() + 5
    while not toxiproxy_server.client().toxics(name) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert toxiproxy_server.client().toxics(name)
    sched.join(10)
    assert toxiproxy_server.client().toxics(name) == []
