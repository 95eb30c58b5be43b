"""Gateway over two simulator replicas: an error-rate fault injected into the canary makes it degrade."""
import asyncio
import importlib.util
import subprocess
import sys
import time
import urllib.request

import aiohttp
import pytest

from chaos.env.model import BreakerPolicy
from chaos.stack.gateway import GatewaySettings, Replica, serve
from tests._support import free_port

TOKEN = "sim-admin-test"


def _sim_available() -> bool:
    return importlib.util.find_spec("chaos.stack.sim.__main__") is not None


@pytest.fixture
def sims():
    if not _sim_available():
        pytest.skip("chaos.stack.sim has no __main__ yet")
    ports = [free_port(), free_port()]
    procs = [subprocess.Popen([sys.executable, "-m", "chaos.stack.sim", "--port", str(p), "--profile", "instant",
                               "--admin-token", TOKEN], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for p in ports]
    try:
        for p in ports:
            for _ in range(150):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{p}/health", timeout=1).read()
                    break
                except OSError:
                    time.sleep(0.1)
            else:
                pytest.fail(f"simulator on port {p} did not become healthy")
        yield [f"http://127.0.0.1:{p}" for p in ports]
    finally:
        for pr in procs:
            pr.terminate()
        for pr in procs:
            try:
                pr.wait(10)
            except subprocess.TimeoutExpired:
                pr.kill()


def test_error_rate_in_canary_degrades_it(sims):
    stable, canary = sims
    policy = BreakerPolicy(window_s=30, min_calls=20, open_wait_s=60, canary_weight=0.5, rollback_error_rate=1.0)
    cfg = GatewaySettings([Replica("s", stable), Replica("c", canary, "canary")], policy=policy, listen="127.0.0.1:0")
    body = {"model": "sim-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": True}

    async def go():
        async with serve(cfg) as gw, aiohttp.ClientSession() as s:
            async with s.post(canary + "/admin/faults", json={"mode": "error-rate", "fraction": 0.2, "status": 500},
                              headers={"Authorization": f"Bearer {TOKEN}"}) as r:
                assert r.status in (200, 201), await r.text()
            served = []
            for _ in range(200):
                async with s.post(gw + "/v1/chat/completions", json=body) as r:
                    await r.read()
                    assert r.headers["Cache-Control"] == "no-store"
                    served.append((r.headers["x-served-by"].split("/")[0], r.status))
            async with s.get(gw + "/admin/state") as r:
                state = await r.json()
            return served, state

    served, state = asyncio.run(go())
    assert state["pools"]["canary"]["state"] == "open"
    assert any(st == 500 for pool, st in served if pool == "canary")
    assert all(pool == "stable" for pool, _ in served[-50:])
    assert all(st == 200 for pool, st in served if pool == "stable")
