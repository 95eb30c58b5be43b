"""What the reference gateway costs: added latency (P50/P99) and throughput, streaming, vs direct calls.

Runs one upstream (the simulator's instant profile when chaos.stack.sim is runnable, else a fast
SSE server in this file) and a gateway in front of it as separate processes, then sends the same
streaming requests alternately direct and through the gateway, in rounds, from one client process.
    .venv/bin/python bench/gateway.py [--rounds 4] [--requests 300] [--concurrency 16]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
BODY = {"model": "sim-model", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8, "stream": True}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_upstream(port: int, tokens: int = 8) -> None:
    """A minimal vLLM-shaped SSE endpoint (used when the simulator is not available)."""
    from aiohttp import web

    async def complete(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(tokens):
            c = {"choices": [{"index": 0, "delta": {"content": f"t{i}"}, "finish_reason": None}], "model": "sim-model"}
            await resp.write(b"data: " + json.dumps(c).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", complete)
    app.router.add_get("/health", lambda r: web.Response(text="ok"))
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


async def wait_ready(url: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession() as s:
        while time.monotonic() < deadline:
            try:
                async with s.post(url + "/v1/chat/completions", json=BODY) as r:
                    if r.status == 200:
                        await r.read()
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise SystemExit(f"bench: {url} did not become ready")


async def batch(session: aiohttp.ClientSession, url: str, n: int, conc: int) -> tuple[list[float], float]:
    lats: list[float] = []
    sem = asyncio.Semaphore(conc)

    async def one() -> None:
        async with sem:
            t0 = time.perf_counter()
            async with session.post(url + "/v1/chat/completions", json=BODY) as r:
                body = await r.read()
                if r.status != 200 or b"[DONE]" not in body:
                    raise SystemExit(f"bench: bad response {r.status} from {url}")
            lats.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return lats, n / (time.perf_counter() - t0)


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(q * len(v) + 0.999999) - 1))]


async def measure(direct: str, gw: str, rounds: int, n: int, conc: int) -> dict:
    res = {"direct": ([], []), "gateway": ([], [])}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        await batch(s, direct, 50, conc)
        await batch(s, gw, 50, conc)  # warm both paths
        for i in range(rounds):
            order = [("direct", direct), ("gateway", gw)] if i % 2 == 0 else [("gateway", gw), ("direct", direct)]
            for name, url in order:
                lats, tput = await batch(s, url, n, conc)
                res[name][0].extend(lats)
                res[name][1].append(tput)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--serve-upstream", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_upstream:
        serve_upstream(args.serve_upstream)
        return 0
    up_port, gw_port = free_port(), free_port()
    use_sim = (REPO / "chaos" / "stack" / "sim" / "__main__.py").exists()
    up_cmd = ([PY, "-m", "chaos.stack.sim", "--port", str(up_port), "--profile", "instant"] if use_sim
              else [PY, __file__, "--serve-upstream", str(up_port)])
    gw_cmd = [PY, "-m", "chaos.stack.gateway", "--listen", f"127.0.0.1:{gw_port}",
              "--stable", f"up=http://127.0.0.1:{up_port}", "--log-level", "WARNING"]
    env = {**os.environ, "CHAOS_GATEWAY_TOKEN": "bench"}
    procs = [subprocess.Popen(c, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for c in (up_cmd, gw_cmd)]
    try:
        direct, gw = f"http://127.0.0.1:{up_port}", f"http://127.0.0.1:{gw_port}"
        asyncio.run(wait_ready(direct))
        asyncio.run(wait_ready(gw))
        res = asyncio.run(measure(direct, gw, args.rounds, args.requests, args.concurrency))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
    d_l, d_t = res["direct"]
    g_l, g_t = res["gateway"]
    d_tp, g_tp = sum(d_t) / len(d_t), sum(g_t) / len(g_t)
    print(f"upstream: {'simulator (instant)' if use_sim else 'bench SSE server'}; {args.rounds} rounds x "
          f"{args.requests} streaming requests, concurrency {args.concurrency}")
    print(f"{'path':<10}{'p50 ms':>10}{'p99 ms':>10}{'req/s':>10}")
    for name, lats, tp in (("direct", d_l, d_tp), ("gateway", g_l, g_tp)):
        print(f"{name:<10}{pct(lats, .5) * 1e3:>10.2f}{pct(lats, .99) * 1e3:>10.2f}{tp:>10.1f}")
    added50 = (pct(g_l, .5) - pct(d_l, .5)) * 1e3
    added99 = (pct(g_l, .99) - pct(d_l, .99)) * 1e3
    print(f"RESULT added_p50_ms={added50:.2f} added_p99_ms={added99:.2f} throughput_ratio={g_tp / d_tp:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
