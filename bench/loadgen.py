"""Load generator cost and accuracy, against the simulator's `instant` profile.

1. streamed completions per second on one core (one process) for: our instrumented Locust user,
   a plain FastHttpUser that only reads the stream, and a plain aiohttp client;
2. TTFT error of our records against the simulator's ground-truth request log at 256 concurrent
   streams: (t_send + ttft) - t_first_token per request, P99 of the absolute value.
Falls back to tests/load/sse_server.py when the simulator is not runnable (says so).
Run: .venv/bin/python bench/loadgen.py [--duration 8]
"""
from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from chaos.load.runner import run_load  # noqa: E402
from chaos.load.stats import percentile  # noqa: E402

CLASSES = {"short": 32, "long": 32, "xl": 32}
MAX_TOKENS = 16
PLAIN = '''
from locust import constant
from chaos.load.users import PlainStreamUser
import json, os
class Plain(PlainStreamUser):
    abstract = False
    wait_time = constant(0)
    path = "/v1/completions"
    payload = json.dumps({"model": "sim-model", "prompt": "hello " * 32, "max_tokens": %d, "stream": True}).encode()
''' % MAX_TOKENS


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready(url: str, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                if r.status == 200:
                    return True
        except OSError:
            time.sleep(0.2)
    return False


class Server:
    """The simulator (instant profile) if runnable, else the test SSE server; both log ground truth."""

    def __init__(self, log: Path) -> None:
        self.log = log
        sim_ok = subprocess.run([sys.executable, "-m", "chaos.stack.sim", "--help"], capture_output=True,
                                timeout=30).returncode == 0
        if sim_ok:
            port = _port()
            self.kind = "simulator (instant)"
            self.proc = subprocess.Popen([sys.executable, "-m", "chaos.stack.sim", "--port", str(port),
                                          "--profile", "instant", "--request-log", str(log)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.url = f"http://127.0.0.1:{port}"
        else:
            self.kind = "tests/load/sse_server.py (simulator not runnable yet)"
            self.proc = subprocess.Popen([sys.executable, str(REPO / "tests/load/sse_server.py"), "--tokens",
                                          str(MAX_TOKENS), "--log", str(log)], stdout=subprocess.PIPE, text=True)
            self.url = self.proc.stdout.readline().strip()
        if not _ready(self.url):
            self.stop()
            raise SystemExit(f"server {self.kind} did not become ready")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def ours(url: str, users: int, duration: float, out: Path) -> tuple[float, list]:
    res = run_load(url, out_dir=out, users=users, duration_s=duration, api="completions", classes=CLASSES,
                   max_tokens=MAX_TOKENS)
    ok = [r for r in res.records if r.ok]
    span = max(r.t_end for r in ok) - min(r.t_send for r in ok) if ok else duration
    return len(ok) / span, res.records


def plain_fasthttp(url: str, users: int, duration: float, tmp: Path) -> float:
    lf = tmp / "plain_locustfile.py"
    lf.write_text(PLAIN)
    prefix = tmp / "plain"
    subprocess.run([sys.executable, "-m", "locust", "-f", str(lf), "--headless", "--host", url, "-u", str(users),
                    "-r", str(users), "-t", f"{int(duration)}s", "--csv", str(prefix), "--only-summary",
                    "--loglevel", "WARNING", "--exit-code-on-error", "0"], cwd=REPO, timeout=duration + 60,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(f"{prefix}_stats.csv") as f:
        row = [r for r in csv.DictReader(f) if r["Name"] == "Aggregated"][0]
    return int(row["Request Count"]) / duration


AIOHTTP = '''
import asyncio, json, sys, time, aiohttp
url, users, duration = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
body = json.dumps({"model": "sim-model", "prompt": "hello " * 32, "max_tokens": %d, "stream": True})
async def user(s, end, n):
    while time.monotonic() < end:
        async with s.post(url + "/v1/completions", data=body, headers={"content-type": "application/json"}) as r:
            async for _ in r.content:
                pass
        n[0] += 1
async def main():
    n = [0]
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=users)) as s:
        t0 = time.monotonic()
        await asyncio.gather(*[user(s, t0 + duration, n) for _ in range(users)])
        print(n[0] / (time.monotonic() - t0))
asyncio.run(main())
''' % MAX_TOKENS


def plain_aiohttp(url: str, users: int, duration: float) -> float:
    out = subprocess.run([sys.executable, "-c", AIOHTTP, url, str(users), str(duration)], capture_output=True,
                         text=True, timeout=duration + 60)
    return float(out.stdout.strip().splitlines()[-1])


def ttft_errors(records: list, log: Path) -> list[float]:
    truth = {}
    for line in log.read_text().splitlines():
        if line.strip():
            e = json.loads(line)
            truth[e.get("request_id")] = e
    errs = []
    for r in records:
        t = truth.get(r.request_id)
        if r.ok and r.ttft is not None and t and t.get("t_first_token"):
            errs.append(((r.t_send + r.ttft) - t["t_first_token"]) * 1000)
    return errs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--users", type=int, default=32)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="loadgen-"))
    log = tmp / "server-requests.jsonl"
    srv = Server(log)
    try:
        print(f"server: {srv.kind} at {srv.url}; {os.cpu_count()} cores on this host (server shares them)")
        ours_s, _ = ours(srv.url, args.users, args.duration, tmp / "ours")
        fast_s = plain_fasthttp(srv.url, args.users, args.duration, tmp)
        aio_s = plain_aiohttp(srv.url, args.users, args.duration)
        _, recs = ours(srv.url, 256, args.duration, tmp / "ttft")
    finally:
        srv.stop()
    errs = ttft_errors(recs, log)
    if not errs:
        raise SystemExit("no records matched the server's request log")
    p99 = percentile([abs(e) for e in errs], 99)
    print(f"{'client':<28}{'completions/s':>14}")
    for name, v in (("ours (instrumented user)", ours_s), ("plain FastHttpUser", fast_s), ("plain aiohttp", aio_s)):
        print(f"{name:<28}{v:>14.0f}")
    print(f"ours / plain FastHttpUser: {ours_s / fast_s:.2f}")
    print(f"TTFT error vs server log at 256 streams: n={len(errs)} p50={percentile(errs, 50):.3f} ms "
          f"p99(|err|)={p99:.3f} ms max={max(errs):.3f} ms")
    print(f"RESULT ours_per_s={ours_s:.0f} fasthttp_per_s={fast_s:.0f} aiohttp_per_s={aio_s:.0f} "
          f"ttft_err_p99_ms={p99:.3f}")


if __name__ == "__main__":
    main()
