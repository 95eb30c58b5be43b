"""What the reference gateway costs: added latency (P50/P99) and throughput, streaming, vs direct calls.

Runs one upstream (the simulator's instant profile when chaos.stack.sim is runnable, else a fast
SSE server in this file) and a gateway in front of it as separate processes, then sends the same
streaming requests alternately direct and through the gateway, in rounds, from one client process.
    .venv/bin/python bench/gateway.py [--rounds 6] [--requests 500] [--concurrency 16] [--stages] [--short]
`--short` (CI: seconds, figures not judged) runs 2 rounds x 100 requests, then `--stages` on 200, and the same
RESULT keys.
The RESULT's added_p50_ms and throughput_ratio are medians over rounds of the gateway batch against
the direct batch beside it (the host is shared: a pooled figure moved with whoever else ran);
added_p99_ms is pooled (a P99 needs the samples). `--stages` then profiles a second gateway and
prints its CPU per request by stage (docs/gateway-cost.md has a table and what changed).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import psutil

from chaos.shared.proc import free_port

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
BODY = {"model": "sim-model", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8, "stream": True}


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


async def measure(direct: str, gw: str, rounds: int, n: int, conc: int) -> dict[str, list[tuple[list[float], float]]]:
    """Per path, one (latencies, req/s) per round; each round runs both paths back to back (ABBA...)."""
    res: dict[str, list[tuple[list[float], float]]] = {"direct": [], "gateway": []}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        await batch(s, direct, 50, conc)
        await batch(s, gw, 50, conc)  # warm both paths
        for i in range(rounds):
            order = [("direct", direct), ("gateway", gw)] if i % 2 == 0 else [("gateway", gw), ("direct", direct)]
            for name, url in order:
                res[name].append(await batch(s, url, n, conc))
    return res


def serve_gateway_profiled(port: int, upstream: str, out: str) -> None:
    """The gateway in this process under cProfile on CPU time (not wall time: on a shared host a
    send that wakes another process shows as seconds of wall time it did not spend), until SIGINT."""
    import cProfile

    from aiohttp import web

    from chaos.stack.gateway.__main__ import parse
    from chaos.stack.gateway.app import _new_loop, build_app

    # the settings of the measured gateway (its flags), so that both run the same rules
    settings, _ = parse(["--listen", f"127.0.0.1:{port}", "--stable", f"up={upstream}", "--admin-token", "bench"])
    prof = cProfile.Profile(time.process_time)
    prof.enable()
    try:
        web.run_app(build_app(settings), host="127.0.0.1", port=port, access_log=None, print=None, loop=_new_loop())
    finally:
        prof.disable()
        prof.dump_stats(out)


# where a function's own CPU time goes, by where it is defined (first match wins)
STAGES = (
    ("gateway: stream check (streamcheck.py)", ("gateway/streamcheck.py",)),
    ("gateway: breaker windows (breaker.py)", ("gateway/breaker.py",)),
    ("gateway: routing, release, mirror (policy.py, release.py)", ("gateway/policy.py", "gateway/release.py")),
    ("gateway: prompt normalization (normalize.py)", ("gateway/normalize.py", "unicodedata")),
    ("gateway: proxy (proxy.py: headers, relay, accounting)", ("gateway/proxy.py", "uuid.py")),
    ("gateway: metrics (admin.py, prometheus_client)", ("gateway/admin.py", "prometheus_client")),
    ("aiohttp client (upstream request and response)", ("aiohttp/client", "aiohttp/connector")),
    ("aiohttp server (request parse, response write: uvloop's sends count here)",
     ("aiohttp/web", "aiohttp/http", "aiohttp/base_protocol")),
    ("aiohttp streams and helpers, multidict, yarl", ("aiohttp/", "multidict", "yarl")),
    ("event loop (asyncio, uvloop)", ("asyncio", "uvloop", "contextvars", "selectors")),
    ("json", ("json/",)),
    ("logging", ("logging/",)),
)


def stage_table(prof_path: str, requests: int) -> list[tuple[str, float]]:
    """(stage, CPU us per request under the profiler) from a cProfile dump, largest first."""
    import pstats

    stats = pstats.Stats(prof_path).stats  # type: ignore[attr-defined]
    out: dict[str, float] = {}
    for (file, _line, fn), (_cc, _nc, tottime, _ct, _callers) in stats.items():
        where = f"{file}:{fn}"
        if "run_app" in fn or "run_until_complete" in fn or "method 'poll'" in fn:
            continue  # the loop's own wait for events: idle, not work
        name = next((label for label, keys in STAGES if any(k in where for k in keys)), "other (builtins, stdlib)")
        out[name] = out.get(name, 0.0) + tottime
    return sorted(((k, v / requests * 1e6) for k, v in out.items()), key=lambda kv: -kv[1])


async def profiled_requests(gw: str, n: int, conc: int) -> None:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        await batch(s, gw, n, conc)


def stages(up_url: str, env: dict[str, str], n: int, conc: int) -> None:
    """Print where the gateway's CPU goes per proxied request, by stage (a separate, profiled gateway)."""
    import signal
    import tempfile

    port = free_port()
    out = tempfile.mktemp(suffix=".prof", prefix="gateway-stages-")
    proc = subprocess.Popen([PY, __file__, "--serve-gateway-profiled", str(port), up_url, out], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        asyncio.run(wait_ready(url))
        asyncio.run(profiled_requests(url, n, conc))
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    rows = stage_table(out, n + 1)
    total = sum(v for _, v in rows)
    print(f"gateway CPU per proxied request by stage ({n} requests under cProfile on CPU time; the profiler "
          f"inflates Python calls, so read the shares)")
    print(f"{'stage':<62}{'us/req':>8}{'share':>8}")
    for name, v in rows:
        print(f"{name:<62}{v:>8.0f}{v / total:>8.1%}")
    os.unlink(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--stages", action="store_true", help="also profile a gateway: CPU per request by stage")
    ap.add_argument("--short", action="store_true", help="2 rounds x 100 requests: seconds, for CI (figures not judged)")
    ap.add_argument("--serve-upstream", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--serve-gateway-profiled", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_upstream:
        serve_upstream(args.serve_upstream)
        return 0
    if args.serve_gateway_profiled:
        port, upstream, out = args.serve_gateway_profiled
        serve_gateway_profiled(int(port), upstream, out)
        return 0
    if args.short:
        args.rounds, args.requests, args.stages = 2, 100, True
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
        gw_proc = psutil.Process(procs[1].pid)
        cpu0 = gw_proc.cpu_times()
        res = asyncio.run(measure(direct, gw, args.rounds, args.requests, args.concurrency))
        cpu1 = gw_proc.cpu_times()
        if args.stages:
            stages(direct, env, 200 if args.short else max(1000, args.requests), args.concurrency)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
    gw_cpu_us = (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / (args.rounds * args.requests) * 1e6
    d_l = [x for lats, _ in res["direct"] for x in lats]
    g_l = [x for lats, _ in res["gateway"] for x in lats]
    d_tp = statistics.mean(tp for _, tp in res["direct"])
    g_tp = statistics.mean(tp for _, tp in res["gateway"])
    # per round: the gateway against the direct batch next to it in time (a slow spell of the shared
    # host hits both); the medians over rounds are the RESULT, the min-max their spread
    added = [(pct(g, .5) - pct(d, .5)) * 1e3 for (g, _), (d, _) in zip(res["gateway"], res["direct"], strict=True)]
    ratio = [gt / dt for (_, gt), (_, dt) in zip(res["gateway"], res["direct"], strict=True)]
    print(f"upstream: {'simulator (instant)' if use_sim else 'bench SSE server'}; {args.rounds} rounds x "
          f"{args.requests} streaming requests, concurrency {args.concurrency}")
    print(f"{'path':<10}{'p50 ms':>10}{'p99 ms':>10}{'req/s':>10}")
    for name, lats, tp in (("direct", d_l, d_tp), ("gateway", g_l, g_tp)):
        print(f"{name:<10}{pct(lats, .5) * 1e3:>10.2f}{pct(lats, .99) * 1e3:>10.2f}{tp:>10.1f}")
    print(f"per round (gateway vs the direct batch beside it): added P50 median {statistics.median(added):.2f} ms "
          f"(min-max {min(added):.2f}-{max(added):.2f}), throughput ratio median {statistics.median(ratio):.3f} "
          f"(min-max {min(ratio):.3f}-{max(ratio):.3f}); gateway CPU {gw_cpu_us:.0f} us/request")
    added99 = (pct(g_l, .99) - pct(d_l, .99)) * 1e3
    print(f"RESULT added_p50_ms={statistics.median(added):.2f} added_p99_ms={added99:.2f} "
          f"throughput_ratio={statistics.median(ratio):.3f} gateway_cpu_us_per_req={gw_cpu_us:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
