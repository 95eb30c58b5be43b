"""The reference gateway's breaker counts what the team's policy says a code means: busy counts as down does.

A 529 (NVIDIA Dynamo's "busy: back off") is a failure in the pool's window like any 5xx; a code below 500
counts only when the environment lists it in retry.overload_statuses; other 4xx never count."""
import asyncio

import aiohttp
import pytest
from gw_upstream import upstream
from test_gateway_proxy import admin, policy, post, settings

from chaos.commands.gateway import settings_from
from chaos.env import parse
from chaos.env.model import RetryPolicy
from chaos.stack.gateway import Replica, serve
from chaos.stack.gateway.rules import OVERLOAD_STATUSES, breaker_failure


def test_default_overload_statuses_are_the_environments() -> None:
    """The stand-in cannot import the environment schema; this keeps its default from drifting away from it."""
    assert OVERLOAD_STATUSES == frozenset(RetryPolicy().overload_statuses)


@pytest.mark.parametrize("status, overload, counts", [
    (529, OVERLOAD_STATUSES, True), (529, frozenset(), True), (503, frozenset(), True), (429, frozenset(), True),
    (420, frozenset({420, 529}), True), (420, OVERLOAD_STATUSES, False), (400, OVERLOAD_STATUSES, False),
    (200, OVERLOAD_STATUSES, False),
])
def test_breaker_failure(status: int, overload: frozenset[int], counts: bool) -> None:
    assert breaker_failure(status, overload) is counts


def test_an_environment_hands_its_overload_statuses_to_the_gateway() -> None:
    env = parse("name: t\nendpoints: {api: 'http://127.0.0.1:1'}\nretry: {overload_statuses: [420, 529]}\n",
                "env.yaml", environ={})
    assert settings_from(env, stable=["http://127.0.0.1:1"]).overload_statuses == frozenset({420, 529})
    assert settings_from(None, stable=["http://127.0.0.1:1"]).overload_statuses == OVERLOAD_STATUSES


@pytest.mark.parametrize("busy_status, overload, trips", [
    (529, OVERLOAD_STATUSES, True), (420, frozenset({420}), True), (420, OVERLOAD_STATUSES, False)])
def test_a_canary_shedding_load_trips_its_breaker(busy_status: int, overload: frozenset[int], trips: bool) -> None:
    async def go():
        async with upstream("s") as (_, su), upstream("c", "busy") as (cu_up, cu):
            cu_up.busy_status = busy_status
            reps = [Replica("s", su), Replica("c", cu, "canary")]
            conf = settings(reps, policy=policy(canary_weight=1.0, min_calls=3), overload_statuses=overload)
            async with serve(conf) as gw, aiohttp.ClientSession() as s:
                got = [await post(s, gw) for _ in range(3)]
                assert [st for st, _, _ in got] == [busy_status] * 3  # passed on as it came: the client backs off
                assert all(h["x-served-by"] == "canary/c" for _, h, _ in got)
                _, state = await admin(s, gw, "/admin/state")
                canary = state["pools"]["canary"]
                if trips:
                    # 3 of 3 failed: the primary tier trips and the rollback tier forces it open
                    assert canary["state"] in ("open", "forced_open"), canary
                else:
                    assert canary["state"] == "closed" and canary["window"]["failures"] == 0, state
    asyncio.run(go())
