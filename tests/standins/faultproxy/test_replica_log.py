"""The replica side over the wire: the harness pages through a real fault proxy's (and a real simulator's)
request log over HTTP, per window, and names the proxy that could not be read instead of passing."""
from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from chaos.faults.tokens import TokenRef
from chaos.load.records import RequestRecord
from chaos.observe.replica_log import PROXY_LOG_PATH, LogEndpoint, ReplicaLogError, ReplicaLogReader, ReplicaLogs, records_window
from chaos.stack.faultproxy import FaultProxyServer
from chaos.verify.accounting import accounting_verdict, server_log_for
from tests._support import free_port
from tests.standins.sim.conftest import ADMIN, Sim


def _line(i: int, t: float, replica: str = "replica-x") -> str:
    return json.dumps({"request_id": f"r{i}", "t_arrival": t, "status": 200, "outcome": "stop", "model": "sim-model",
                       "replica": replica, "path": "/v1/chat/completions"}) + "\n"


@pytest.fixture
def logged_proxy(faultproxy_bin, token_file, tmp_path) -> Iterator[FaultProxyServer]:
    """A real proxy whose log already holds 25 lines (t_arrival 1000-1024); nothing runs behind it."""
    log = tmp_path / "replica-x.proxy.jsonl"
    log.write_text("".join(_line(i, 1000.0 + i) for i in range(25)))
    with FaultProxyServer("replica-x", f"127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}",
                          TokenRef(file=str(token_file)), request_log=str(log), log_path=tmp_path / "proxy.out",
                          binary=faultproxy_bin) as server:
        yield server


def _reader(server: FaultProxyServer, token: TokenRef, **kw: Any) -> ReplicaLogReader:
    return ReplicaLogReader(LogEndpoint("fault proxy", server.name, server.url, token, PROXY_LOG_PATH), **kw)


def _env(tmp_path: Path, proxies: list[dict[str, Any]], targets: list[Any] | None = None) -> Any:
    """What server_log_for reads of an environment: its fault proxies and targets."""
    fps = [SimpleNamespace(name=p["name"], admin_url=f"http://{p['listen']}", token_file=p["token_file"],
                           token_env="CHAOS_PROXY_TOKEN") for p in proxies]
    return SimpleNamespace(name="t", embedded="none", state_dir=str(tmp_path / "state"), fault_proxies=fps,
                           targets=targets or [])


def test_pages_windows_and_cursors(logged_proxy, token_file):
    r = _reader(logged_proxy, TokenRef(file=str(token_file)), page_lines=4)
    assert [x["request_id"] for x in r.read()] == [f"r{i}" for i in range(25)]  # 7 pages of 4
    got = r.read(since=1010.0, until=1015.0)
    assert [x["t_arrival"] for x in got] == [1010.0 + i for i in range(6)]
    # what was read is remembered: a later window starts past every line that arrived before it
    start = r.start_for(1020.5)
    assert start > 0 and start == len("".join(_line(i, 1000.0 + i) for i in range(20)))
    assert r.start_for(1000.0) == 0
    # lines appended while the proxy runs (a line still being written is left for later)
    log = Path(logged_proxy.request_log or "")
    with open(log, "a") as f:
        f.write(_line(25, 1030.0) + _line(26, 1031.0) + '{"request_id": "r27", "t_arr')
        f.flush()
        assert [x["request_id"] for x in r.read(since=1024.0)] == ["r24", "r25", "r26"]
        f.write('ival": 1032.0}\n')
    assert [x["request_id"] for x in r.read(since=1031.0)] == ["r26", "r27"]


def test_a_bad_line_is_one_error_naming_the_proxy_and_cursor(logged_proxy, token_file):
    log = Path(logged_proxy.request_log or "")
    size = log.stat().st_size
    with open(log, "a") as f:
        f.write("{not json\n")
    r = _reader(logged_proxy, TokenRef(file=str(token_file)), page_lines=10)
    with pytest.raises(ReplicaLogError) as e:
        r.read(since=1024.0)
    msg = str(e.value)
    assert msg.startswith("fault proxy replica-x: bad request-log line") and "\n" not in msg
    assert f"at cursor {r.start_for(1024.0)}" in msg and r.start_for(1024.0) <= size


def test_wrong_token_and_no_log_are_named(faultproxy_bin, logged_proxy, token_file, tmp_path):
    with pytest.raises(ReplicaLogError, match=r"fault proxy replica-x: GET /_chaos/log at cursor 0 -> 401 unauthorized"):
        _reader(logged_proxy, TokenRef(literal="wrong")).read()
    with FaultProxyServer("nolog", f"127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}",
                          TokenRef(file=str(token_file)), binary=faultproxy_bin) as bare:
        env = _env(tmp_path, [{"name": "nolog", "listen": bare.listen, "token_file": str(token_file)}])
        log = server_log_for(env)
    assert log.source is None and log.rows == []
    assert log.unproven == ("fault proxy nolog: GET /_chaos/log at cursor 0 -> 404 "
                            "no request log: this proxy was started without --request-log")


def test_an_unreachable_proxy_makes_accounting_not_proven(logged_proxy, token_file, tmp_path):
    dead = f"127.0.0.1:{free_port()}"
    env = _env(tmp_path, [{"name": "replica-x", "listen": logged_proxy.listen, "token_file": str(token_file)},
                          {"name": "replica-dead", "listen": dead, "token_file": str(token_file)}])
    rec = RequestRecord(request_id="r3", attempt=1, t_send=1002.9, e2e=0.2, status=200, outcome="succeeded",
                        final=True)
    log = server_log_for(env, since=1000.0, until=1010.0)
    assert log.unproven is not None and log.unproven.startswith(f"fault proxy replica-dead: not answering at http://{dead}")
    row = accounting_verdict([rec], log).row("server_side")
    assert row.ok is False and row.detail.startswith("not proven: fault proxy replica-dead: not answering")
    # with only the proxy that answers, the same record is proven from its log
    env.fault_proxies = env.fault_proxies[:1]
    log = server_log_for(env, since=1000.0, until=1010.0)
    v = accounting_verdict([rec], log)
    assert log.source == "fault proxy" and len(log.rows) == 11 and v.ok, v.rows
    assert v.row("server_side").measured == "fault proxy" and v.row("server_saw_success").ok
    # no proxy and no simulator at all: client-side only, not judged
    none = accounting_verdict([rec], server_log_for(_env(tmp_path, [])))
    assert none.row("server_side").measured == "client-side only" and none.row("server_side").ok is None


def test_simulators_first_then_the_proxies(logged_proxy, token_file, tmp_path):
    """A simulator answering its log is the source; one that cannot (no --request-log) hands over to the
    fault proxies; both failing names both."""
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "admin.token").write_text(ADMIN + "\n")
    sim_log = tmp_path / "sim.requests.jsonl"
    sims = [Sim("--served-model-name", "sim-model", "--profile", "instant", "--request-log", str(sim_log))]
    try:
        sims.append(Sim("--served-model-name", "sim-model", "--profile", "instant"))
        t0 = time.time()
        st, _, _ = sims[0].request("POST", "/v1/completions", {"model": "sim-model", "prompt": "hi", "max_tokens": 2},
                                   headers={"x-request-id": "via-sim"})
        assert st == 200
        proxies = [{"name": "replica-x", "listen": logged_proxy.listen, "token_file": str(token_file)}]

        def target(s: Sim) -> SimpleNamespace:
            return SimpleNamespace(name=f"sim-{s.port}", host="127.0.0.1", port=s.port, simulator=object())

        log = server_log_for(_env(tmp_path, proxies, [target(sims[0])]), since=t0 - 1)
        assert log.source == "simulator" and [r["request_id"] for r in log.rows] == ["via-sim"], log
        log = server_log_for(_env(tmp_path, proxies, [target(sims[1])]), since=1000.0, until=1001.0)
        assert log.source == "fault proxy" and len(log.rows) == 2
        env = _env(tmp_path, [{**proxies[0], "listen": f"127.0.0.1:{free_port()}"}], [target(sims[1])])
        log = server_log_for(env)
        assert log.source is None and log.unproven and \
            log.unproven.startswith(f"simulator sim-{sims[1].port}: GET /admin/log at cursor 0 -> 404 no request log") \
            and "; fault proxy replica-x: not answering" in log.unproven
    finally:
        for s in sims:
            s.stop()


def test_records_window_spans_the_records_with_slack():
    recs = [RequestRecord(request_id="a", attempt=1, t_send=10.0, e2e=1.0),
            RequestRecord(request_id="b", attempt=1, t_send=12.0, e2e=3.0)]
    assert records_window(recs, slack_s=2.0) == (8.0, 17.0)
    assert records_window([]) == (None, None)


def test_replica_logs_for_env_names_every_source(tmp_path):
    env = _env(tmp_path, [{"name": "p", "listen": "127.0.0.1:1", "token_file": "/nonexistent"}],
               [SimpleNamespace(name="s", host="127.0.0.1", port=2, simulator=object()),
                SimpleNamespace(name="v", host="127.0.0.1", port=3, simulator=None)])
    logs = ReplicaLogs.for_env(env)
    assert logs.has("simulator") and logs.has("fault proxy")
    sim = logs.read("simulator")
    assert sim is not None and sim.failures == ["target v is not a simulator"]
    proxy = logs.read("fault proxy")
    assert proxy is not None and proxy.failures == ["fault proxy p: no token: admin token: cannot read a token "
                                                    "from /nonexistent"]
