"""The gray-release suite asks the environment's gateway for its release admin: the reference gateway
answers, an environment without a gateway admin or a server that is no gateway is told why not."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from gw_upstream import upstream

from chaos.env.model import BreakerPolicy, Endpoints
from chaos.experiment.release_stages import no_release_admin
from chaos.stack.gateway import GatewaySettings, Replica, serve

TOKEN = "release-admin-token"


def _env(admin: str | None):
    return SimpleNamespace(name="e", endpoints=Endpoints(api="http://127.0.0.1:1", gateway_admin=admin),
                           gateway=SimpleNamespace(admin_token=TOKEN))


def test_no_gray_release_admin_is_said_with_why():
    assert "has no gateway admin endpoint: its gateway has no gray-release admin" in no_release_admin(_env(None))

    async def go():
        async with upstream("s") as (_, s_url), upstream("c") as (_, c_url):
            cfg = GatewaySettings([Replica("s", s_url), Replica("c", c_url, "canary")], BreakerPolicy(),
                                  listen="127.0.0.1:0", admin_token=TOKEN)
            async with serve(cfg) as gw:
                return (await asyncio.to_thread(no_release_admin, _env(gw)),
                        await asyncio.to_thread(no_release_admin, _env(s_url)))  # an upstream is no gateway

    reference, other = asyncio.run(go())
    assert reference is None
    assert other is not None and other.startswith("the gateway at http://") and "has no gray-release admin: GET" in other
