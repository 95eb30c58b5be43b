"""Simulator benchmark: throughput, emission timing, and the a100-80g calibration table.

Run: .venv/bin/python bench/sim_bench.py [--quick] [--short]
`--short` (CI: seconds, figures not judged): one throughput round of 1 s, 1 s of emission timing, 24 short and
12 long calibration requests (the first 8 of each are the warm-up), the same RESULT keys.
The server is a subprocess pinned to CPU 0 (one core); the load client runs in this process,
pinned to the other CPU when there is one, with a raw asyncio HTTP/1.1 client (keep-alive).
1. completions/s: `instant` profile, 256 concurrent streams of 16 tokens. The machine may be
   shared, so the RESULT figure is completions per CPU-second the server actually got (its
   one-core capacity), best of three rounds; the wall-clock rate, the CPU share it got and every
   round are printed too. Interleaved with it, the same client against a bare aiohttp server that
   only streams 16 chunks (the issue's 5,000/s reference): their ratio does not drift with the host.
2. emission timing: `h200` profile, 512 concurrent streams, server-side error |t_write - t_step_end|
   of every chunk write against its step's scheduled end (GET /admin/stats). A step's writes are
   one serial burst centred on the scheduled end, so the error is two-sided.
3. calibration: `a100-80g`, --max-num-seqs 8, 8 closed-loop clients, unique prompts of 512 /
   8192 tokens, 48-80 output tokens (ignore_eos); run in real time (--time-scale 1: a compressed
   clock would scale the host's own HTTP overhead up with it). P99 = per-request end-to-end latency.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from chaos.shared.proc import free_port  # noqa: E402
from chaos.stack.sim.virtual import calibration_lengths  # noqa: E402

TOKEN = "bench"


# The baseline: a bare aiohttp server that only streams 16 SSE chunks per POST, as fast as it can
# (what the "about 5,000/s here" refers to). Same client, same pinned core, same meter.
BARE_SERVER = r"""
import asyncio, sys
from aiohttp import web
CHUNK = b'data: {"choices":[{"text":" the","index":0}]}\n\n'
async def handle(request):
    await request.read()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for _ in range(16):
        await resp.write(CHUNK)
    await resp.write(b"data: [DONE]\n\n")
    return resp
async def main():
    app = web.Application()
    app.router.add_post("/v1/completions", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", int(sys.argv[1])).start()
    print("Application startup complete.", flush=True)
    await asyncio.Event().wait()
try:
    import uvloop
    uvloop.run(main())
except ImportError:
    asyncio.run(main())
"""


class Server:
    """A simulator subprocess on one core (or, with bare=True, the bare aiohttp baseline)."""

    def __init__(self, *args: str, pin: bool = True, bare: bool = False) -> None:
        self.port = free_port()
        cmd = [sys.executable, "-m", "chaos.stack.sim", "--port", str(self.port),
               "--admin-token", TOKEN, *args]
        if bare:
            cmd = [sys.executable, "-c", BARE_SERVER, str(self.port)]
        # its output goes to a file, never to a pipe nobody reads after start-up: past a pipe's 64 KiB of
        # log lines the server would block in its logging call, event loop and all, and /admin/stats time out
        self.log = tempfile.NamedTemporaryFile(prefix="sim-bench-", suffix=".log", delete=False)  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT)
        if pin and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(self.proc.pid, {0})
        end = time.time() + 30
        while b"Application startup complete." not in Path(self.log.name).read_bytes():
            if self.proc.poll() is not None or time.time() > end:
                tail = Path(self.log.name).read_bytes()[-2000:].decode(errors="replace")
                self.stop()
                raise RuntimeError(f"simulator did not start within 30 s; the end of its output:\n{tail}")
            time.sleep(0.05)

    def stats(self) -> dict:
        rq = urllib.request.Request(f"http://127.0.0.1:{self.port}/admin/stats",
                                    headers={"Authorization": f"Bearer {TOKEN}"})
        return json.loads(urllib.request.urlopen(rq, timeout=5).read())

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        os.unlink(self.log.name)


def _request(port: int, body: dict) -> bytes:
    data = json.dumps(body).encode()
    return (f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n").encode() + data


class _Conn(asyncio.Protocol):
    """One keep-alive connection issuing the same streaming request back to back."""

    def __init__(self, req: bytes, state: dict) -> None:
        self.req, self.state, self.tail = req, state, b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.tr = transport
        self.tr.write(self.req)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.tail = (self.tail + data)[-16:]
        if self.tail.endswith(b"\r\n0\r\n\r\n"):
            self.tail = b""
            self.state["done"] += 1
            if self.state["running"]:
                self.tr.write(self.req)  # type: ignore[attr-defined]


async def _drive(port: int, conns: int, body: dict, warmup: float, duration: float) -> float:
    loop = asyncio.get_running_loop()
    state = {"done": 0, "running": True}
    req = _request(port, body)
    trs = [(await loop.create_connection(lambda: _Conn(req, state), "127.0.0.1", port))[0]
           for _ in range(conns)]
    await asyncio.sleep(warmup)
    start_n, t0 = state["done"], time.perf_counter()
    await asyncio.sleep(duration)
    rate = (state["done"] - start_n) / (time.perf_counter() - t0)
    state["running"] = False
    await asyncio.sleep(0.3)
    for tr in trs:
        tr.close()
    return rate


def _run(coro):  # noqa: ANN001
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)


def bench_throughput(duration: float, bare: bool = False) -> tuple[float, float, float]:
    """(wall completions/s, completions per server CPU-second, server CPU share)."""
    import psutil

    srv = Server("--profile", "instant", "--max-num-seqs", "1024", bare=bare)
    proc = psutil.Process(srv.proc.pid)
    try:
        body = {"prompt": "bench the simulator please", "max_tokens": 16, "stream": True,
                "ignore_eos": True}
        state: dict = {}

        async def measured() -> float:
            task = asyncio.ensure_future(_drive(srv.port, 256, body, 1.0, duration))
            await asyncio.sleep(1.0)
            c0, t0 = sum(proc.cpu_times()[:2]), time.perf_counter()
            await asyncio.sleep(duration)
            state["cpu"] = sum(proc.cpu_times()[:2]) - c0
            state["wall"] = time.perf_counter() - t0
            return await task

        rate = _run(measured())
        share = state["cpu"] / state["wall"]
        return rate, rate / max(share, 1e-9), share
    finally:
        srv.stop()


def bench_emission(duration: float) -> dict:
    srv = Server("--profile", "h200", "--max-num-seqs", "512", "--time-scale", "4", pin=False)
    try:
        body = {"prompt": "emission timing check", "max_tokens": 64, "stream": True,
                "ignore_eos": True}
        _run(_drive(srv.port, 512, body, 0.5, duration))
        return srv.stats()
    finally:
        srv.stop()


async def _closed_loop(port: int, prompt_len: int, total: int, scale: float) -> dict:
    import aiohttp

    lengths, rng = calibration_lengths(), random.Random(7)
    words = [f"w{rng.randrange(10**6)}" for _ in range(prompt_len * 2)]
    e2e: list[float] = []
    tokens, issued = 0, 0
    first_done: list[float] = []

    async def client(sess: aiohttp.ClientSession) -> None:
        nonlocal tokens, issued
        while issued < total:
            i = issued
            issued += 1
            start = rng.randrange(prompt_len)
            prompt = f"r{i} " + " ".join(words[start:start + prompt_len - 1])
            t0 = time.perf_counter()
            async with sess.post(f"http://127.0.0.1:{port}/v1/completions",
                                 json={"prompt": prompt, "max_tokens": lengths(i),
                                       "ignore_eos": True}) as r:
                body = await r.json()
            t1 = time.perf_counter()
            if i >= 8:
                e2e.append(t1 - t0)
                tokens += body["usage"]["completion_tokens"]
            elif not first_done:
                first_done.append(t1)

    async with aiohttp.ClientSession() as sess:
        t_start = time.perf_counter()
        await asyncio.gather(*(client(sess) for _ in range(8)))
        elapsed = time.perf_counter() - (first_done[0] if first_done else t_start)
    e2e.sort()
    p99 = e2e[min(len(e2e) - 1, int(0.99 * len(e2e)))]
    return {"tok_s": tokens / elapsed * scale, "p99_s": p99 / scale}


def bench_calibration(n_short: int, n_long: int, scale: float = 1.0) -> tuple[dict, dict]:
    srv = Server("--profile", "a100-80g", "--max-num-seqs", "8", "--time-scale", str(scale))
    try:
        short = asyncio.run(_closed_loop(srv.port, 512, n_short, scale))
        long_ = asyncio.run(_closed_loop(srv.port, 8192, n_long, scale))
        return short, long_
    finally:
        srv.stop()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--short", action="store_true", help="one short round of each part: seconds, for CI")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})
    dur = 2.0 if args.short else 3.0 if args.quick else 6.0
    n_rounds = 1 if args.short else 3
    calibration = (24, 12) if args.short else (100, 40) if args.quick else (200, 80)
    # best of three interleaved rounds, simulator and bare baseline: the host is shared, its speed
    # drifts by 20 % over minutes, and interference only ever lowers a figure
    rounds, bares = [], []
    for _ in range(n_rounds):
        rounds.append(bench_throughput(dur / 2))
        bares.append(bench_throughput(dur / 2, bare=True)[1])
    cps_wall, cps, share = max(rounds, key=lambda r: r[1])
    bare = max(bares)
    st = bench_emission(dur / 2 if args.short else dur)
    short, long_ = bench_calibration(*calibration)
    lag = st["emission_lag_ms"]
    print(f"{'measure':<44}{'value':>12}{'target':>16}")
    print(f"{'completions/s wall (instant, 256 x 16 tok)':<44}{cps_wall:>12.0f}{'':>16}")
    print(f"{'  server CPU share of its core':<44}{share:>12.2f}{'':>16}")
    print(f"{'completions per server CPU-second':<44}{cps:>12.0f}{'>= 4000':>16}")
    print(f"{'  the rounds (best is the figure)':<44}{' '.join(f'{r[1]:.0f}' for r in rounds):>28}")
    print(f"{'bare aiohttp SSE server, per CPU-second':<44}{bare:>12.0f}{'~5000 here':>16}")
    print(f"{'  its rounds':<44}{' '.join(f'{b:.0f}' for b in bares):>28}")
    print(f"{'simulator / bare server (same core, client)':<44}{cps / bare:>12.2f}{'>= 0.80':>16}")
    print(f"{'emission |error| p50 ms (h200, 512 streams)':<44}{lag['p50']:>12.2f}{'':>16}")
    print(f"{'emission |error| p99 ms (h200, 512 streams)':<44}{lag['p99']:>12.2f}{'< 5':>16}")
    print(f"{'  loop wake-up lateness p50/p99 ms (guarded)':<44}"
          f"{st['wakeup_lag_ms']['p50']:>12.2f}{st['wakeup_lag_ms']['p99']:>16.2f}")
    print(f"{'  (samples, steps)':<44}{st['emission_samples']:>12}{st['steps']:>16}")
    print("calibration a100-80g, run in real time (--time-scale 1); P99 = E2E")
    print(f"{'short 512 tok: output tok/s':<44}{short['tok_s']:>12.0f}{'~2800 (+-15%)':>16}")
    print(f"{'short 512 tok: P99 E2E ms':<44}{short['p99_s'] * 1000:>12.0f}{'< 350':>16}")
    print(f"{'long 8192 tok: output tok/s':<44}{long_['tok_s']:>12.0f}{'~420 (+-15%)':>16}")
    print(f"{'long 8192 tok: P99 E2E ms':<44}{long_['p99_s'] * 1000:>12.0f}{'~1800 (+-15%)':>16}")
    print(f"RESULT completions_per_s={cps:.0f} emission_p99_ms={lag['p99']:.2f} "
          f"short_tok_s={short['tok_s']:.0f} short_p99_ms={short['p99_s'] * 1000:.0f} "
          f"long_tok_s={long_['tok_s']:.0f} long_p99_ms={long_['p99_s'] * 1000:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
