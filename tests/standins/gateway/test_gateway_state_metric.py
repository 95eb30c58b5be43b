"""The reference gateway's own breaker state, scraped from its real /metrics as the breaker suite
does (chaos.verify.gateway_state.watch), and shown beside a black-box tier."""
import asyncio
import time
from types import SimpleNamespace

import aiohttp
from gw_upstream import upstream

from chaos.env.model import BreakerPolicy, Endpoints
from chaos.observe.timeline import Timeline
from chaos.stack.gateway import GatewaySettings, Replica, serve
from chaos.verify import gateway_state as gs
from chaos.verify.verdict import Verdict

TOKEN = "state-metric-token"


class Watching:
    """What watch() and beside() use of a suite's scenario: its timeline and its observers."""

    def __init__(self) -> None:
        self.timeline, self.observers = Timeline(), []

    def add_observer(self, o):
        self.observers.append(o)
        return o


def test_forced_rollback_read_from_the_gateways_metrics():
    async def go():
        async with upstream("s") as (_, s_url), upstream("c") as (_, c_url):
            cfg = GatewaySettings([Replica("s", s_url), Replica("c", c_url, "canary")], listen="127.0.0.1:0",
                                  admin_token=TOKEN, policy=BreakerPolicy(canary_weight=0.5))
            async with serve(cfg) as gw, aiohttp.ClientSession() as s:
                env = SimpleNamespace(endpoints=Endpoints(api=gw, gateway_admin=gw), breaker=cfg.policy)
                other = SimpleNamespace(endpoints=env.endpoints, breaker=BreakerPolicy(state_metric="team_pool_state"))
                sc, sc_other = Watching(), Watching()
                gs.watch(sc, env, interval_s=0.1)
                gs.watch(sc_other, other, interval_s=0.1)
                await asyncio.sleep(1.0)
                t0 = time.time()
                hdr = {"Authorization": f"Bearer {TOKEN}"}
                async with s.post(gw + "/admin/force", json={"pool": "canary", "state": "forced_open"}, headers=hdr) as r:
                    assert r.status == 200
                await asyncio.sleep(1.0)
                async with s.post(gw + "/admin/reset", json={}, headers=hdr) as r:
                    assert r.status == 200
                await asyncio.sleep(0.5)
                t1 = time.time()
                for w in (sc, sc_other):
                    for o in w.observers:
                        o.stop()
                return env, other, sc, sc_other, t0, t1

    env, other, sc, sc_other, t0, t1 = asyncio.run(go())
    env.breaker.window_s = 0.1  # judge over the fault only (beside() adds one breaker window)
    rows = {}
    for observed in ("rollback", "degrade", "none"):
        v = Verdict("breaker")
        rows[observed] = gs.beside(v, observed, sc, env, (t0, t1), t1)
    assert rows["rollback"].measured.startswith("forced open (3) from +") and rows["rollback"].measured.endswith(": agrees")
    assert "DISAGREES with the black-box verdict: the traffic shows degrade" in rows["degrade"].measured
    assert "DISAGREES" in rows["none"].measured
    assert all(r.ok is None and not r.unproven for r in rows.values())
    before = gs.beside(Verdict("breaker"), "none", sc, env, (t0 - 0.9, t0 - 0.1), t0 - 0.1)
    assert before.measured.startswith("closed throughout") and before.measured.endswith(": agrees")
    absent = gs.beside(Verdict("breaker"), "rollback", sc_other, other, (t0, t1), t1)
    assert absent.mark == "not proven" and absent.measured == "not proven: gateway exports no team_pool_state"
