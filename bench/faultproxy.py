"""What chaos-faultproxy costs: added latency (P50/P99) and throughput, streaming, vs direct calls.

One run starts two simulators, each with a chaos-faultproxy in front, and sends the same
streaming chat completions (16 tokens, `ignore_eos`) in interleaved rounds over three paths:
`direct` (client -> simulator), `proxy` (client -> proxy -> simulator) and `proxy+rule` (the same
proxy with one installed rule that matches nothing: the hot path that evaluates rules; the
rule's `seen` counter is checked), and `toxiproxy` (client -> the real Toxiproxy -> simulator: a
plain TCP relay, which parses nothing, as the floor any proxy on this host pays). Every path gets the
same wall time per round, at C = 64 and
C = 256 streams (C workers, one keep-alive connection each).

throughput -- upstream `--profile instant` (no modelled GPU time: the simulator's Python is the
  bottleneck), closed loop: each worker sends its next request as soon as the previous answer
  ended. req/s = requests completed in the wall time. This host is small (2 cores shared by the
  client, the proxy and the simulator), so whatever CPU the proxy spends is taken from the
  simulator and the client: req/s drops by that share and, in a saturated closed loop, latency
  rises by the same factor (Little's law: latency = C / req/s), so these p50/p99 mostly restate
  the throughput ratio.
latency -- upstream `--profile h200 --time-scale 8` (GPU-like pace: a decode step of 10-20 ms
  for the whole batch, as a real replica streams; the host is not saturated), closed loop with
  an exponential think time (mean 5 ms) before each request so that arrivals do not march in
  lockstep with the engine's steps. Its +p50/+p99 are what the proxy adds to a stream.

p50/p99: per request, from sending it to the end of the chunked body (`data: [DONE]` and the
terminating chunk). The client is a minimal asyncio protocol on uvloop (one write per request, no
HTTP library), cheap enough that the comparison measures the proxy rather than the client.
`proxy us/req` is the proxy's (or Toxiproxy's) CPU time per completed request; `others` is the host's busy CPU
(cores) outside this bench's processes during that path's windows: the machine may be shared,
and above ~0.1 the figures are disturbed.
Last line: `RESULT added_p50_ms=.. added_p99_ms=.. throughput_ratio=..` at C = 64: the latency
phase's added P50/P99 and the throughput phase's proxy/direct req/s, and toxiproxy/direct req/s.
    .venv/bin/python bench/faultproxy.py [--rounds 4] [--seconds 2] [--concurrency 64,256] [--short]
`--short` (CI: seconds, figures not judged): 1 round x 0.5 s per path at C = 64, the same RESULT keys.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from chaos.shared import proc as _proc  # noqa: E402
from chaos.shared.proc import free_port  # noqa: E402
from chaos.stack.toxiproxy import ToxiproxyServer  # noqa: E402

PY = sys.executable
BINARY = REPO / ".tools" / "bin" / "chaos-faultproxy"
BODY = json.dumps({"model": "sim-model", "messages": [{"role": "user", "content": "hello"}],
                   "max_tokens": 16, "ignore_eos": True, "stream": True}).encode()
TOKEN = "bench-token"
PATHS = ("direct", "proxy", "proxy+rule", "toxiproxy")
NOMATCH_RULE = {"name": "bench-nomatch", "kind": "abort", "status": 503,
                "match": {"path": "/never", "header": {"x-bench": "never"}}}


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


async def window(port: int, conc: int, seconds: float, think_s: float = 0.0,
                 seed: int = 0) -> tuple[list[float], float]:
    """C workers in a closed loop for `seconds` (an exponential think time of mean think_s
    before each request when think_s > 0); latencies of the requests that ended in it, req/s."""
    loop = asyncio.get_running_loop()
    conns = [(await loop.create_connection(Conn, "127.0.0.1", port))[1] for _ in range(conc)]
    req, lats, perf, rnd = request_bytes(port), [], time.perf_counter, random.Random(seed)
    t_end = perf() + seconds

    async def worker(c: Conn) -> None:
        while True:
            if think_s:
                await asyncio.sleep(rnd.expovariate(1 / think_s))
            t0 = perf()
            if t0 >= t_end:
                return
            resp = await c.call(req)
            t1 = perf()
            if not resp.startswith(b"HTTP/1.1 200") or b"data: [DONE]" not in resp:
                raise SystemExit(f"bench: bad answer from port {port}: {resp[:300]!r}")
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


class Meter:
    """CPU seconds used by the bench's own processes, by the proxies, and by the whole host."""

    def __init__(self, ours: list[psutil.Process], proxies: list[psutil.Process]) -> None:
        self.ours, self.proxies = ours + [psutil.Process()], proxies

    @staticmethod
    def _cpu(procs: list[psutil.Process]) -> float:
        total = 0.0
        for p in procs:
            t = p.cpu_times()
            total += t.user + t.system
        return total

    def read(self) -> tuple[float, float, float]:
        t = psutil.cpu_times()
        busy = sum(t) - t.idle - getattr(t, "iowait", 0.0)
        return busy, self._cpu(self.ours), self._cpu(self.proxies)


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(q * len(v) + 0.999999) - 1))]


async def phase(up: int, fp: int, tp: int, conc: int, rounds: int, seconds: float, think_s: float,
                meter: Meter) -> dict:
    """Interleaved rounds over the three paths; the no-match rule is installed only for the third.
    Per path: latencies, req/s per round, [proxy CPU s, requests, other processes' CPU s, wall s]."""
    res: dict[str, tuple[list[float], list[float], list[float]]] = {k: ([], [], [0.0] * 4) for k in PATHS}
    ports = {"direct": up, "proxy": fp, "proxy+rule": fp, "toxiproxy": tp}
    for port in (up, fp, tp):
        await window(port, conc, 0.5, think_s)  # warm-up: connections, caches, the proxy's pools
    for i in range(rounds):
        for name in PATHS[i % len(PATHS):] + PATHS[:i % len(PATHS)]:
            if name == "proxy+rule":
                admin(fp, "POST", "/_chaos/rules", NOMATCH_RULE)
            b0, o0, p0, w0 = *meter.read(), time.perf_counter()
            lats, tput = await window(ports[name], conc, seconds, think_s, seed=i)
            b1, o1, p1, w1 = *meter.read(), time.perf_counter()
            acc = res[name][2]
            acc[0] += p1 - p0
            acc[1] += len(lats)
            acc[2] += max(0.0, (b1 - b0) - (o1 - o0))
            acc[3] += w1 - w0
            if name == "proxy+rule":
                rule = admin(fp, "DELETE", "/_chaos/rules/" + NOMATCH_RULE["name"])
                if rule["seen"] < len(lats) or rule["hits"]:
                    raise SystemExit(f"bench: the rule saw {rule['seen']} of {len(lats)} requests")
            res[name][0].extend(lats)
            res[name][1].append(tput)
    return res


def summary(res: dict) -> dict[str, tuple[float, ...]]:
    """path -> (p50 ms, p99 ms, req/s, proxy CPU us per request, other processes' cores)."""
    return {k: (pct(lats, .5) * 1e3, pct(lats, .99) * 1e3, sum(tps) / len(tps),
                acc[0] / max(1.0, acc[1]) * 1e6, acc[2] / max(1e-9, acc[3]))
            for k, (lats, tps, acc) in res.items()}


def report(title: str, s: dict[str, tuple[float, ...]]) -> None:
    d50, d99, dtp = s["direct"][:3]
    print(f"  {title}")
    print(f"  {'path':<12}{'p50 ms':>9}{'p99 ms':>9}{'req/s':>9}{'+p50 ms':>9}{'+p99 ms':>9}{'ratio':>8}"
          f"{'proxy us/req':>14}{'others':>8}")
    for name, (p50, p99, tp, cpu, others) in s.items():
        cpu_s = f"{cpu:>14.0f}" if name != "direct" else f"{'-':>14}"
        print(f"  {name:<12}{p50:>9.2f}{p99:>9.2f}{tp:>9.1f}{p50 - d50:>9.2f}{p99 - d99:>9.2f}"
              f"{tp / dtp:>8.3f}{cpu_s}{others:>8.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=2.0, help="wall time per path per round")
    ap.add_argument("--concurrency", default="64,256")
    ap.add_argument("--short", action="store_true", help="1 round x 0.5 s at C = 64: seconds, for CI")
    args = ap.parse_args()
    if args.short:
        args.rounds, args.seconds, args.concurrency = 1, 0.5, "64"
    concs = [int(c) for c in args.concurrency.split(",")]
    subprocess.run([str(REPO / "scripts" / "build-faultproxy.sh")], check=True)
    ups = {"instant": ["--profile", "instant"], "paced": ["--profile", "h200", "--time-scale", "8"]}
    ports = {k: (free_port(), free_port(), free_port()) for k in ups}
    results: dict[int, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tok = Path(tmp) / "token"
        tok.write_text(TOKEN + "\n")
        cmds = []
        toxi = ToxiproxyServer("127.0.0.1", free_port()).start()  # a plain TCP relay: the floor for any proxy
        toxi.create_proxies([{"name": f"bench-{n}", "listen": f"127.0.0.1:{p[2]}", "upstream": f"127.0.0.1:{p[0]}"}
                             for n, p in ports.items()])
        for name, flags in ups.items():
            up, fp, _ = ports[name]
            cmds.append([PY, "-m", "chaos.stack.sim", "--port", str(up), *flags])
            cmds.append([str(BINARY), "--listen", f"127.0.0.1:{fp}", "--upstream", f"http://127.0.0.1:{up}",
                         "--name", f"bench-{name}", "--token-file", str(tok),
                         "--request-log", str(Path(tmp) / f"{name}.jsonl")])
        procs = [subprocess.Popen(c, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for c in cmds]
        try:
            for up, fp, tp in ports.values():
                wait_ready(up)
                wait_ready(fp)
                wait_ready(tp)
            import uvloop
            ps = [psutil.Process(p.pid) for p in procs]
            assert toxi.proc is not None
            tp = psutil.Process(toxi.proc.pid)
            meter = Meter(ps + [tp], ps[1::2] + [tp])
            for conc in concs:
                results[conc] = {
                    name: summary(uvloop.run(phase(*ports[name], conc, args.rounds, args.seconds,
                                                   think, meter)))
                    for name, think in (("instant", 0.0), ("paced", 0.005))}
        finally:
            toxi.stop()
            for p in procs:
                _proc.terminate(p, 10)
    print(f"{args.rounds} interleaved rounds x {args.seconds:g} s per path; streaming chat completions "
          f"of 16 tokens; {os.cpu_count()} CPUs")
    for conc, r in results.items():
        print(f"\nconcurrency {conc}")
        report("throughput: instant upstream, closed loop (saturating)", r["instant"])
        report("latency: GPU-paced upstream (h200 x8), arrivals with think time", r["paced"])
    r = results[concs[0]]
    added50 = r["paced"]["proxy"][0] - r["paced"]["direct"][0]
    added99 = r["paced"]["proxy"][1] - r["paced"]["direct"][1]
    ratio = r["instant"]["proxy"][2] / r["instant"]["direct"][2]
    relay = r["instant"]["toxiproxy"][2] / r["instant"]["direct"][2]
    print(f"RESULT added_p50_ms={added50:.2f} added_p99_ms={added99:.2f} throughput_ratio={ratio:.3f} "
          f"toxiproxy_ratio={relay:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
