"""Gray release at the reference gateway: admission by request attributes, and shadow traffic."""
import asyncio
import json

import aiohttp
from gw_upstream import STREAM_BODY, upstream
from test_gateway_proxy import admin, post, settings

from chaos.stack.gateway import Replica, serve
from chaos.stack.gateway.release import MIRROR_HEADER, answer_text


def test_only_admitted_requests_reach_the_canary():
    async def go():
        async with upstream("s") as (_, su), upstream("c") as (cu, cu_url), \
                serve(settings([Replica("s", su), Replica("c", cu_url, "canary")])) as gw:
            async with aiohttp.ClientSession() as s:
                status, rel = await admin(s, gw, "/admin/release",
                                          {"canary_weight": 1.0, "admit": {"X-User-Tier": ["standard"]}})
                assert status == 200 and rel == {"canary_weight": 1.0, "mirror": 0.0,
                                                 "admit": {"x-user-tier": ["standard"]}}
                served = []
                for tier in ["standard", "vip", None, "standard", "vip"]:
                    hdr = {"x-user-tier": tier} if tier else {}
                    _, h, _ = await post(s, gw, headers=hdr)
                    served.append(h["x-served-by"].split("/")[0])
                assert served == ["canary", "stable", "stable", "canary", "stable"]
                assert [r["headers"]["x-user-tier"] for r in cu.received] == ["standard", "standard"]
    asyncio.run(go())


def test_release_settings_are_checked():
    async def go():
        async with upstream("s") as (_, su), serve(settings([Replica("s", su)])) as gw:
            async with aiohttp.ClientSession() as s:
                for bad, word in [({"mirror": 2}, "mirror"), ({"admit": {"x-tier": "vip"}}, "admit"),
                                  ({"canary_weight": -1}, "canary_weight"), ({"mirrors": 0.1}, "unknown")]:
                    status, body = await admin(s, gw, "/admin/release", bad)
                    assert status == 400 and word in body["error"], (bad, body)
                status, _ = await admin(s, gw, "/admin/release", {"mirror": 0.5}, token="wrong")
                assert status == 401
    asyncio.run(go())


def test_shadow_copies_go_to_the_canary_and_users_only_get_stable():
    async def go():
        async with upstream("s") as (_, su), upstream("c", "other_answer") as (cu, cu_url), \
                serve(settings([Replica("s", su), Replica("c", cu_url, "canary")])) as gw:
            async with aiohttp.ClientSession() as s:
                await admin(s, gw, "/admin/release", {"canary_weight": 0.0, "mirror": 1.0})
                for i in range(4):
                    status, h, body = await post(s, gw, headers={"x-request-id": f"r{i}"})
                    assert status == 200 and h["x-served-by"] == "stable/s" and body == STREAM_BODY
                for _ in range(50):
                    _, got = await admin(s, gw, "/admin/mirror?since=0")
                    if len(got["pairs"]) == 4:
                        break
                    await asyncio.sleep(0.05)
                pairs = sorted(got["pairs"], key=lambda p: p["request_id"])
                assert [p["request_id"] for p in pairs] == ["r0", "r1", "r2", "r3"]
                assert all(p["stable"]["text"] == "hello" and p["canary"]["text"] == "hey there" for p in pairs)
                assert all(p["stable"]["status"] == p["canary"]["status"] == 200 for p in pairs)
                assert all(r["headers"][MIRROR_HEADER] == "1" for r in cu.received) and len(cu.received) == 4
                _, later = await admin(s, gw, f"/admin/mirror?since={pairs[-1]['t'] + 1}")
                assert later["pairs"] == []
    asyncio.run(go())


def test_answer_text_reads_json_and_streams():
    assert answer_text(STREAM_BODY, sse=True) == "hello"
    assert answer_text(json.dumps({"choices": [{"message": {"content": "hi"}}]}).encode(), sse=False) == "hi"
    assert answer_text(json.dumps({"choices": [{"text": "a b"}]}).encode(), sse=False) == "a b"
    assert answer_text(b"not json", sse=False) == ""
