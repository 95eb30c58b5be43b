"""What chaos-faultproxy costs: added latency (P50/P99) and throughput, streaming, vs direct calls.

Runs the simulator (instant profile: no modelled GPU time, so the simulator's own Python is the
bottleneck) as the upstream and chaos-faultproxy in front of it, then, in one run, alternates
the same streaming chat completions (~16 tokens each) between three paths in interleaved rounds:
`direct` (client -> simulator), `proxy` (client -> proxy -> simulator) and `proxy+rule` (the proxy
with one installed rule that matches nothing, i.e. the hot path that evaluates rules).

Each round keeps C streams in flight (closed loop: C workers, one keep-alive connection each,
every worker sends its next request as soon as the previous answer ended) for the same wall time
per path, at C = 64 and C = 256. req/s is the requests completed in that wall time; p50/p99 are
per-request latency from sending the request to the end of the chunked body (`data: [DONE]` and
the terminating chunk). The client is a minimal asyncio protocol on uvloop (one write per request,
no HTTP library), so on a small machine -- client, proxy and simulator share the same cores --
the comparison measures the proxy, not the client: what it costs in CPU that the simulator and
the client then lack shows up as lower req/s and, in a closed loop, higher latency.
The last line is `RESULT added_p50_ms=.. added_p99_ms=.. throughput_ratio=..` for C = 64, proxy
vs direct.
    .venv/bin/python bench/faultproxy.py [--rounds 4] [--seconds 2] [--concurrency 64,256]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
BINARY = REPO / ".tools" / "bin" / "chaos-faultproxy"
BODY = json.dumps({"model": "sim-model", "messages": [{"role": "user", "content": "hello"}],
                   "max_tokens": 16, "ignore_eos": True, "stream": True}).encode()
TOKEN = "bench-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request_bytes(port: int) -> bytes:
    return (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n").encode() + BODY


class Conn(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection that sends a request and waits for the end of its
    chunked answer (the `0\\r\\n\\r\\n` after `data: [DONE]`)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.done: asyncio.Future[bytes] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.buf.endswith(b"\r\n0\r\n\r\n") and self.done is not None and not self.done.done():
            self.done.set_result(bytes(self.buf))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(ConnectionError(f"connection lost: {exc}"))

    async def call(self, req: bytes) -> bytes:
        self.buf.clear()
        self.done = asyncio.get_running_loop().create_future()
        assert self.transport is not None
        self.transport.write(req)
        return await self.done


async def open_conn(port: int) -> Conn:
    _, proto = await asyncio.get_running_loop().create_connection(Conn, "127.0.0.1", port)
    return proto


def check(resp: bytes, port: int) -> None:
    if not resp.startswith(b"HTTP/1.1 200") or b"data: [DONE]" not in resp:
        raise SystemExit(f"bench: bad answer from port {port}: {resp[:300]!r}")


async def window(port: int, conc: int, seconds: float) -> tuple[list[float], float]:
    """C workers in a closed loop for `seconds`; latencies of the requests that ended in it."""
    conns = [await open_conn(port) for _ in range(conc)]
    req, lats, perf = request_bytes(port), [], time.perf_counter
    t_end = perf() + seconds

    async def worker(c: Conn) -> None:
        while True:
            t0 = perf()
            if t0 >= t_end:
                return
            resp = await c.call(req)
            t1 = perf()
            check(resp, port)
            if t1 <= t_end:
                lats.append(t1 - t0)

    t0 = perf()
    await asyncio.gather(*(worker(c) for c in conns))
    elapsed = max(perf(), t_end) - t0
    for c in conns:
        assert c.transport is not None
        c.transport.close()
    return lats, len(lats) / elapsed


def admin(port: int, method: str, path: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"Bearer {TOKEN}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def wait_ready(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(request_bytes(port))
                s.settimeout(5)
                data = b""
                while not data.endswith(b"\r\n0\r\n\r\n"):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                if data.startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"bench: port {port} did not become ready")


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(q * len(v) + 0.999999) - 1))]


def build() -> None:
    subprocess.run([str(REPO / "scripts" / "build-faultproxy.sh")], check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=2.0, help="wall time per path per round")
    ap.add_argument("--concurrency", default="64,256")
    args = ap.parse_args()
    concs = [int(c) for c in args.concurrency.split(",")]
    build()
    up_port, fp_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        tok = Path(tmp) / "token"
        tok.write_text(TOKEN + "\n")
        up_cmd = [PY, "-m", "chaos.stack.sim", "--port", str(up_port), "--profile", "instant"]
        fp_cmd = [str(BINARY), "--listen", f"127.0.0.1:{fp_port}", "--upstream",
                  f"http://127.0.0.1:{up_port}", "--name", "bench", "--token-file", str(tok),
                  "--request-log", str(Path(tmp) / "proxy.jsonl")]
        procs = [subprocess.Popen(c, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for c in (up_cmd, fp_cmd)]
        try:
            wait_ready(up_port)
            wait_ready(fp_port)
            # the proxy+rule path is the same proxy with a rule that never matches: the two proxy
            # rows alternate installing it
            results = {}
            for conc in concs:
                results[conc] = run_concurrency(conc, up_port, fp_port, args.rounds, args.seconds)
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
    print(f"upstream: simulator (instant); {args.rounds} rounds x {args.seconds:g} s per path, "
          f"streaming chat completions of 16 tokens; {os.cpu_count()} CPUs")
    for conc, res in results.items():
        report(conc, res)
    d_l, d_t = results[concs[0]]["direct"]
    g_l, g_t = results[concs[0]]["proxy"]
    added50, added99 = (pct(g_l, .5) - pct(d_l, .5)) * 1e3, (pct(g_l, .99) - pct(d_l, .99)) * 1e3
    ratio = (sum(g_t) / len(g_t)) / (sum(d_t) / len(d_t))
    print(f"RESULT added_p50_ms={added50:.2f} added_p99_ms={added99:.2f} throughput_ratio={ratio:.3f}")
    return 0


def run_concurrency(conc: int, up_port: int, fp_port: int, rounds: int, seconds: float) -> dict:
    """Interleaves direct / proxy / proxy+rule; the rule is installed only for the third."""
    rule = {"name": "bench-nomatch", "kind": "abort", "status": 503,
            "match": {"path": "/never", "header": {"x-bench": "never"}}}

    async def go() -> dict:
        res: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in
                                                            ("direct", "proxy", "proxy+rule")}
        ports = {"direct": up_port, "proxy": fp_port, "proxy+rule": fp_port}
        for port in (up_port, fp_port):
            await window(port, conc, 0.5)  # warm-up: connections, caches, the proxy's pools
        names = list(res)
        for i in range(rounds):
            for name in names[i % 3:] + names[:i % 3]:
                if name == "proxy+rule":
                    admin(fp_port, "POST", "/_chaos/rules", rule)
                lats, tput = await window(ports[name], conc, seconds)
                if name == "proxy+rule":
                    seen = admin(fp_port, "DELETE", "/_chaos/rules/bench-nomatch")
                    if seen["seen"] < len(lats) or seen["hits"]:
                        raise SystemExit(f"bench: the rule saw {seen['seen']} of {len(lats)} requests")
                res[name][0].extend(lats)
                res[name][1].append(tput)
        return res

    import uvloop
    return uvloop.run(go())


def report(conc: int, res: dict) -> None:
    d_l, d_t = res["direct"]
    d50, d99, d_tp = pct(d_l, .5), pct(d_l, .99), sum(d_t) / len(d_t)
    print(f"\nconcurrency {conc}")
    print(f"{'path':<12}{'p50 ms':>9}{'p99 ms':>9}{'req/s':>9}{'+p50 ms':>9}{'+p99 ms':>9}{'ratio':>8}")
    for name, (lats, tps) in res.items():
        p50, p99, tp = pct(lats, .5), pct(lats, .99), sum(tps) / len(tps)
        print(f"{name:<12}{p50 * 1e3:>9.2f}{p99 * 1e3:>9.2f}{tp:>9.1f}{(p50 - d50) * 1e3:>9.2f}"
              f"{(p99 - d99) * 1e3:>9.2f}{tp / d_tp:>8.3f}")


if __name__ == "__main__":
    sys.exit(main())
