"""The gateway against small in-test upstreams on free ports: pass-through, headers, retry, tiers, admin."""
import asyncio
import json
import logging

import aiohttp
import pytest
from gw_upstream import STREAM_BODY, upstream

from chaos.env.model import BreakerPolicy
from chaos.shared.signing import sign
from chaos.stack.gateway import GatewaySettings, Replica, serve

CHAT = {"model": "m", "messages": [{"role": "user", "content": "\uff28i \u2460"}], "stream": True}
TOKEN = "admin-token-for-tests"


def policy(**kw):
    return BreakerPolicy(**{"window_s": 10, "min_calls": 3, "open_wait_s": 60, "canary_weight": 0.0, **kw})


def settings(replicas, **kw):
    kw.setdefault("policy", policy())
    return GatewaySettings(replicas=replicas, listen="127.0.0.1:0", admin_token=TOKEN, **kw)


async def post(s, url, body=CHAT, headers=None):
    async with s.post(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                      headers={"Content-Type": "application/json", **(headers or {})}) as r:
        return r.status, r.headers, await r.read()


async def admin(s, gw, path, body=None, token=TOKEN):
    hdr = {"Authorization": f"Bearer {token}"} if token else {}
    method = s.post if body is not None else s.get
    async with method(gw + path, json=body, headers=hdr) as r:
        return r.status, await r.json()


def test_streaming_pass_through_headers_and_normalization():
    async def go():
        async with upstream("a") as (up, url), serve(settings([Replica("a", url)])) as gw:
            async with aiohttp.ClientSession() as s:
                status, hdr, body = await post(s, gw, headers={"x-request-id": "rid-1"})
                assert status == 200 and body == STREAM_BODY
                assert hdr["Cache-Control"] == "no-store" and hdr["x-served-by"] == "stable/a"
                assert hdr["x-request-id"] == "rid-1" and hdr["Content-Type"].startswith("text/event-stream")
                assert up.received[0]["headers"]["x-request-id"] == "rid-1"
                sent = json.loads(up.received[0]["body"])["messages"][0]["content"]
                assert sent == "Hi 1"
                status, hdr, body = await post(s, gw, body={**CHAT, "stream": False})
                assert status == 200 and json.loads(body)["served"] == "a" and hdr["x-request-id"]
    asyncio.run(go())


def test_one_clients_cookie_is_never_sent_for_another():
    async def go():
        # a host name: a cookie jar keeps no cookie from an IP address, so 127.0.0.1 would hide a shared jar
        async with upstream("a") as (up, url), \
                serve(settings([Replica("a", url.replace("127.0.0.1", "localhost"))])) as gw:
            up.set_cookie = "session=alice; Path=/"
            async with aiohttp.ClientSession() as alice:
                status, hdr, _ = await post(alice, gw, body={**CHAT, "stream": False})
                assert status == 200 and hdr["Set-Cookie"].startswith("session=alice")  # passed on to its client
            up.set_cookie = None
            async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as bob:
                await post(bob, gw, body={**CHAT, "stream": False})
            assert "Cookie" not in up.received[-1]["headers"]
    asyncio.run(go())


def test_normalization_can_be_switched_off():
    async def go():
        async with upstream("a") as (up, url), serve(settings([Replica("a", url)],
                                                              policy=policy(normalize_unicode=False))) as gw:
            async with aiohttp.ClientSession() as s:
                await post(s, gw)
        assert json.loads(up.received[0]["body"])["messages"][0]["content"] == "\uff28i \u2460"
    asyncio.run(go())


def test_connection_error_retried_once_on_the_same_pool_and_counted():
    async def go():
        async with upstream("b") as (up, url), upstream("gone") as (_, dead):
            pass  # `dead` is now a closed port
        async with upstream("b") as (up, url):
            reps = [Replica("dead", dead), Replica("b", url)]
            async with serve(settings(reps, policy=policy(min_calls=100))) as gw, aiohttp.ClientSession() as s:
                results = [await post(s, gw) for _ in range(4)]
                assert all(st == 200 for st, _, _ in results)
                assert {h["x-served-by"] for _, h, _ in results} == {"stable/b"}
                _, state = await admin(s, gw, "/admin/state")
                window = state["pools"]["stable"]["window"]
                assert window["failures"] == 4 and window["calls"] == 8  # each request met the dead one first
        async with serve(settings([Replica("dead", dead)])) as gw, aiohttp.ClientSession() as s:
            status, hdr, body = await post(s, gw)
            assert status == 502 and hdr["x-served-by"] == "stable/dead" and hdr["Cache-Control"] == "no-store"
    asyncio.run(go())


def test_a_replica_failing_in_a_row_is_taken_out_of_rotation_only_when_configured():
    """A replica answering 500 to everything (a dead one behind a fault proxy answers 502): without ejection
    it keeps half the traffic; with `eject_after` 2 it gets two requests, then none until its hold (3 s) is over,
    then one, which fails and takes it out again. The admin state says which replica is out."""
    async def run(**kw):
        async with upstream("dead", "http500") as (dead, du), upstream("b") as (b, bu):
            reps = [Replica("dead", du), Replica("b", bu)]
            async with serve(settings(reps, policy=policy(min_calls=1000), **kw)) as gw, \
                    aiohttp.ClientSession() as s:
                first = [await post(s, gw) for _ in range(10)]
                _, state = await admin(s, gw, "/admin/state")
                # still out now, so out for every request since it was taken out; then wait out its hold
                await asyncio.sleep(state["ejection"]["out"].get("dead", 0) + 0.05)
                then = [await post(s, gw) for _ in range(4)]
        return [st for st, _, _ in first], [st for st, _, _ in then], state, len(dead.received)

    first, then, state, to_dead = asyncio.run(run())
    assert first.count(500) == 5 and then.count(500) == 2 and to_dead == 7 and "ejection" in state
    assert state["ejection"]["ejections"] == 0
    first, then, state, to_dead = asyncio.run(run(eject_after=2, eject_s=3.0))
    assert first == [500, 200, 500] + [200] * 7 and state["ejection"]["out"].keys() == {"dead"}
    assert then == [500, 200, 200, 200] and to_dead == 3


def test_a_request_lost_after_it_was_sent_is_not_passed_to_the_next_replica():
    """The replica may have taken it: a retry behind the client's back would run it twice (chaos
    explore found this with a reset-peer toxic; suites/regressions/schedule-16f9767b3d36.yaml)."""
    async def go():
        async with upstream("r", "reset") as (reset, ru), upstream("b") as (b, bu):
            reps = [Replica("r", ru), Replica("b", bu)]
            async with serve(settings(reps, policy=policy(min_calls=100))) as gw, aiohttp.ClientSession() as s:
                results = [await post(s, gw) for _ in range(6)]
        lost = [(st, h["x-served-by"]) for st, h, _ in results if h["x-served-by"] == "stable/r"]
        assert lost and all(st == 502 for st, _ in lost)
        assert len(reset.received) == len(lost) and len(b.received) == len(results) - len(lost)
    asyncio.run(go())


@pytest.mark.parametrize("defect", [None, "rollback-forgotten-on-restart"])
def test_a_replica_restart_keeps_a_rollback_unless_the_defect_is_planted(monkeypatch, defect):
    from chaos.stack.gateway.defects import ENV_VAR

    if defect:
        monkeypatch.setenv(ENV_VAR, defect)
    else:
        monkeypatch.delenv(ENV_VAR, raising=False)

    async def go():
        async with upstream("s") as (sup, su), upstream("c") as (_, cu):
            reps = [Replica("s", su), Replica("c", cu, "canary")]
            async with serve(settings(reps, scrape_interval_s=0.05)) as gw, aiohttp.ClientSession() as s:
                await asyncio.sleep(0.2)
                assert (await admin(s, gw, "/admin/force", {"pool": "canary", "state": "forced_open"}))[0] == 200
                sup.started += 30.0  # the stable replica came back as a new process, a moment after the rollback
                await asyncio.sleep(0.3)
                _, state = await admin(s, gw, "/admin/state")
        assert state["replica_restarts"] == {"s": 1}
        return state["pools"]["canary"]["state"], state["transitions"][-1]["reason"]
    got, reason = asyncio.run(go())
    if defect:
        assert (got, reason) == ("closed", "replica s restarted: pools rebuilt")
    else:
        assert got == "forced_open"


def test_an_unknown_planted_defect_is_one_line(monkeypatch):
    from chaos.errors import ConfigError
    from chaos.stack.gateway.defects import ENV_VAR, planted_from_env

    monkeypatch.setenv(ENV_VAR, "typo")
    with pytest.raises(ConfigError, match="CHAOS_PLANTED_DEFECT='typo': expected one of rollback-forgotten-on-restart"):
        planted_from_env()


def test_errors_pass_through_and_oom_burst_trips_the_canary():
    async def go():
        async with upstream("s") as (_, su), upstream("c", "oom500") as (cu_up, cu):
            reps = [Replica("s", su), Replica("c", cu, "canary")]
            async with serve(settings(reps, policy=policy(canary_weight=1.0, min_calls=100))) as gw, \
                    aiohttp.ClientSession() as s:
                first = [await post(s, gw) for _ in range(3)]
                assert [st for st, _, _ in first] == [500, 500, 500]
                assert b"CUDA out of memory" in first[0][2] and first[0][1]["x-served-by"] == "canary/c"
                _, state = await admin(s, gw, "/admin/state")
                assert state["pools"]["canary"]["state"] == "open"
                assert "oom burst" in state["transitions"][-1]["reason"]
                st, hdr, _ = await post(s, gw)
                assert st == 200 and hdr["x-served-by"] == "stable/s"
                async with s.get(gw + "/metrics") as r:
                    text = await r.text()
                assert 'chaos_gateway_pool_state{pool="canary"} 2.0' in text
                assert 'chaos_gateway_transitions_total{from="closed",pool="canary",to="open"} 1.0' in text
                assert "chaos_gateway_window_error_rate" in text and "chaos_gateway_window_p99_seconds" in text
                # the OOM answers, counted apart for an OOM-burst alert (examples/monitoring/rules)
                assert 'chaos_gateway_oom_total{pool="canary",replica="c"} 3.0' in text
                assert 'chaos_gateway_oom_total{pool="stable"' not in text
    asyncio.run(go())


def test_error_chunk_in_stream_counts_as_oom_failure():
    async def go():
        async with upstream("c", "oom_chunk") as (_, cu), upstream("s") as (_, su):
            reps = [Replica("s", su), Replica("c", cu, "canary")]
            async with serve(settings(reps, policy=policy(canary_weight=1.0, min_calls=100))) as gw, \
                    aiohttp.ClientSession() as s:
                for _ in range(3):
                    st, _, body = await post(s, gw)
                    assert st == 200 and b"out of memory" in body
                _, state = await admin(s, gw, "/admin/state")
                assert state["pools"]["canary"]["state"] == "open"
    asyncio.run(go())


@pytest.mark.parametrize("mode, stream", [("ok", True), ("no_finish", True), ("duplicate", True), ("cut", True),
                                          ("aborted", True), ("ok", False), ("aborted", False)])
def test_an_answer_counts_as_a_failure_unless_it_is_a_whole_answer(mode, stream):
    async def go():
        async with upstream("s", mode) as (_, su):
            async with serve(settings([Replica("s", su)], policy=policy(min_calls=100))) as gw, \
                    aiohttp.ClientSession() as s:
                for _ in range(2):
                    try:
                        st, _, _ = await post(s, gw, {**CHAT, "stream": stream})
                        assert st == 200  # the client gets what the upstream said; the breaker judges it
                    except aiohttp.ClientPayloadError:
                        assert mode == "cut"  # the client must see the cut too
                _, state = await admin(s, gw, "/admin/state")
                window = state["pools"]["stable"]["window"]
                assert window["calls"] == 2
                assert window["failures"] == (0 if mode == "ok" else 2), (mode, window)
    asyncio.run(go())


def test_admin_api_needs_the_token_and_resets_a_rollback():
    async def go():
        async with upstream("s") as (_, su), upstream("c") as (_, cu):
            reps = [Replica("s", su), Replica("c", cu, "canary")]
            async with serve(settings(reps, policy=policy(canary_weight=1.0))) as gw, aiohttp.ClientSession() as s:
                assert (await admin(s, gw, "/admin/state", token=None))[0] == 401
                assert (await admin(s, gw, "/admin/state", token="wrong"))[0] == 401
                st, _ = await admin(s, gw, "/admin/force", {"pool": "canary", "state": "forced_open"})
                assert st == 200
                _, hdr, _ = await post(s, gw)
                assert hdr["x-served-by"] == "stable/s"
                assert (await admin(s, gw, "/admin/force", {"pool": "nope"}))[0] == 400
                st, out = await admin(s, gw, "/admin/reset", {"pool": "canary"})
                assert st == 200 and out["state"]["canary"]["state"] == "closed"
                _, hdr, _ = await post(s, gw)
                assert hdr["x-served-by"] == "canary/c"
                assert (await admin(s, gw, "/admin/config", {"canary_weight": 2}))[0] == 400
    asyncio.run(go())


def test_hmac_rejects_unsigned_tampered_expired_replayed(caplog):
    key = b"k3y-never-in-logs"

    async def go():
        async with upstream("a") as (up, url):
            async with serve(settings([Replica("a", url)], hmac_key=key)) as gw, aiohttp.ClientSession() as s:
                body = json.dumps(CHAT).encode()
                path = "/v1/chat/completions"
                good = sign(key, "POST", path, body)
                hdrs = {"Content-Type": "application/json"}
                cases = {
                    "unsigned": ({}, body),
                    "tampered": (sign(key, "POST", path, body), body.replace(b"\"m\"", b"\"x\"")),
                    "expired": (sign(key, "POST", path, body, timestamp=1_000_000), body),
                    "wrong key": (sign(b"other", "POST", path, body), body),
                }
                for name, (sig, data) in cases.items():
                    async with s.post(gw + path, data=data, headers={**hdrs, **sig}) as r:
                        assert r.status == 401, name
                        assert r.headers["Cache-Control"] == "no-store"
                async with s.post(gw + path, data=body, headers={**hdrs, **good}) as r:
                    assert r.status == 200 and await r.read() == STREAM_BODY
                async with s.post(gw + path, data=body, headers={**hdrs, **good}) as r:
                    assert r.status == 401 and b"replayed" in await r.read()
                assert len(up.received) == 1
                assert not any(h.lower().startswith("x-chaos-") for h in up.received[0]["headers"])
    with caplog.at_level(logging.DEBUG):
        asyncio.run(go())
    assert key.decode() not in caplog.text and TOKEN not in caplog.text


def test_leak_trend_from_replica_metrics_trips_the_pool():
    async def go():
        async with upstream("s") as (_, su), upstream("c") as (cup, cu):
            reps = [Replica("s", su), Replica("c", cu, "canary")]
            cfg = settings(reps, policy=policy(leak_window_s=1.0, leak_rate_per_hour=0.05),
                           leak_hour_s=10.0, scrape_interval_s=0.05)
            async with serve(cfg) as gw, aiohttp.ClientSession() as s:
                for _ in range(40):
                    cup.rss *= 1.01          # ~+20 % per 'hour' of 10 s
                    await asyncio.sleep(0.05)
                _, state = await admin(s, gw, "/admin/state")
                assert state["pools"]["canary"]["state"] == "open"
                assert state["pools"]["stable"]["state"] == "closed"
                assert "leak" in state["transitions"][-1]["reason"]
    asyncio.run(go())
