"""Client commands in the streams suite: a limit derived from the command's own fault-free run and the
retry deadline lets a slow start pass; a client that truly hangs still fails, and its verdict says
what it did last, from its output and the replica side's log (the real fault proxy's, over HTTP)."""
from __future__ import annotations

import shlex
import sys

from chaos.observe.replica_log import PROXY_LOG_PATH, LogEndpoint, ReplicaLogReader
from chaos.verify.streams import ClientLimit, attempts_for, client_verdict, run_client_command
from tests.e2e.verify.test_backoff_e2e import CLIENTS

REF = f"{shlex.quote(sys.executable)} {CLIENTS / 'reference_client.py'} {{base_url}} --timeout 5"
DEADLINE_S = 2.0  # the retry policy's deadline in these runs (small: a hang is waited out in seconds)


def _log(proxy, since: float) -> list[dict]:
    reader = ReplicaLogReader(LogEndpoint("fault proxy", proxy.name, proxy.url, proxy.token, PROXY_LOG_PATH))
    return reader.read(since=since)


def _judge(answers, proxy, truth: str):
    log = _log(proxy, min(a.window[0] for a in answers) - 1)
    return client_verdict("cmd", answers, [attempts_for(a, log) for a in answers], truth=truth,
                          truth_finish="length", expect_whole=True)


def test_a_slow_start_passes_under_the_derived_limit(proxy):
    slow = f"sleep 3; exec {REF}"
    steady = run_client_command("slow", slow, proxy.url, timeout_s=60)
    took = steady.window[1] - steady.window[0]
    assert steady.ok and steady.shown and took >= 3.0
    limit = ClientLimit.derive(steady_run_s=took, deadline_s=DEADLINE_S)
    assert limit.seconds > 2 * 3.0 and "fault-free run" in limit.why
    got = [run_client_command("slow", slow, proxy.url, timeout_s=limit.seconds) for _ in range(2)]
    assert all(a.ok and not a.timed_out for a in got), [a.error for a in got]
    v = _judge(got, proxy, steady.shown)
    assert v.ok, [r.line() for r in v.rows]
    # the old fixed rule (deadline + 10 s) with this deadline left the start 12 s; a start beyond
    # it (a busy machine) failed a client that did nothing wrong: the derived limit follows the start
    assert ClientLimit.derive(steady_run_s=9.0, deadline_s=DEADLINE_S).seconds > DEADLINE_S + 10


def test_a_client_that_hangs_after_its_answer_fails_naming_what_it_did_last(proxy):
    hang = f"{REF}; sleep 60"  # answers, prints, then never exits
    got = run_client_command("hang", hang, proxy.url, timeout_s=8.0)
    assert got.timed_out and not got.ok and got.shown, got
    assert got.window[1] - got.window[0] < 15  # killed with its children, not waited out
    v = _judge([got], proxy, got.shown)
    row = v.row("exited_in_time")
    assert not row.ok and "no exit within 8.0 s" in row.detail
    assert "partial output" in row.detail and "its one request arrived" in row.detail
    assert "and the client then did not exit" in row.detail, row.detail


def test_a_client_that_hangs_before_sending_fails_naming_that(proxy):
    got = run_client_command("mute", "sleep 60", proxy.url, timeout_s=2.0)
    assert got.timed_out and got.shown == ""
    row = _judge([got], proxy, "x").row("exited_in_time")
    assert not row.ok and "no output; no request of it reached the replicas" in row.detail, row.detail
