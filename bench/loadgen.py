"""Load generator cost and accuracy against the simulator.

1. streamed completions per second on one core (one process), `instant` profile, for: our
   instrumented Locust user, a plain FastHttpUser that only reads the stream, and a plain aiohttp
   client. Reported per wall second and per CPU second of the client process while its users ran
   (= completions/s on one fully used core; the RESULT uses this: the host is shared with the server).
   --rounds rounds, interleaved (ABC, then CBA, ...): each path's median and min-max, and the
   per-round ratio ours / plain FastHttpUser (neighbours in time) with its median, IQR and min-max.
   The RESULT's per-path figures and ratio are medians. Only completed requests count, for every
   client; all three ask for the same stream (the usage chunk included).
   Like for like: every client sends the same request (a unique 32-token prompt, 16 tokens back,
   streamed, the usage chunk asked for) to the same server, with 32 users in one process, and reads
   every byte of every stream. The plain clients stop there: they neither split the stream into
   events nor time them. That work (each event timed by its kernel stamp, each line checked, the
   usage, finish and error chunks parsed, one record written per attempt) is what ours is for and
   what the ratio prices; giving the plain path a parser of its own would hide it. The plain
   FastHttpUser ends as ours does (a load shape for the duration, the runner's --stop-timeout, so a
   request in flight at the end completes in both).
   --side-by-side runs ours and the plain FastHttpUser at the same time in each round (aiohttp
   alone after): on a shared host the per-round ratio then moves much less.
   The ratio depends on how busy the host is: a client that is late to its sockets finds several
   events per receive, which the plain reader pays for once and ours once per event, so a loaded
   host lowers it (the host's load average is printed before and after).
2. TTFT error of our records against the simulator's ground-truth request log at 256 concurrent
   streams: (t_send + ttft) - t_first_token per request, where the log's t_first_token is when the
   server handed the first token's chunk to the kernel and the client times each event by the
   kernel's receive stamp (chaos.load.kstamp). Records sent in the first WARMUP_S seconds are left
   out (the 256 users start together). Two runs:
   - RESULT: up to 256 users in flight against the `h200` profile at --time-scale 8 (20-50 ms
     steps, the order of a real decode step at this batch), Poisson arrivals just above what they
     can serve (so all 256 stay busy; the mean in flight is printed): the client keeps up, as a
     measuring client must;
   - shown too: 256 closed-loop streams against `instant`, where one client process is CPU-bound
     (its busy share is printed) and a late read can only be bounded, not corrected: TCP merges
     segments that wait unread and keeps the newest stamp.
Falls back to tests/integration/load/sse_server.py when the simulator is not runnable (says so).
Run: .venv/bin/python bench/loadgen.py [--duration 4] [--rounds 5] [--side-by-side] [--short]
`--short` (CI: seconds, figures not judged): 1 round of 1 s per client and 1 s TTFT runs, the same RESULT keys.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from chaos.load.config import LoadConfig  # noqa: E402
from chaos.load.runner import run_load  # noqa: E402
from chaos.load.stats import percentile  # noqa: E402
from chaos.shared.proc import free_port  # noqa: E402

CLASSES = {"short": 32, "long": 32, "xl": 32}
# what run_load gives ours at the default timeout (chaos.load.runner.LoadHandle.start): the plain path gets the same
STOP_TIMEOUT_S = max(1, int(min(LoadConfig().timeout_s, 5.0)))
MAX_TOKENS = 16
# every client sends a unique 32-token prompt (a counter first), so the server does the same work
# and asks for the usage chunk as ours does (chaos.load.workloads.body), so every client reads the same bytes
PROMPT_JSON = ('{"model": "sim-model", "prompt": "%d ' + "abc " * 31 + '", "max_tokens": ' + str(MAX_TOKENS)
               + ', "stream": true, "stream_options": {"include_usage": true}}')
PLAIN = '''
import itertools, json, os, time
from locust import LoadTestShape, constant, events
from chaos.load.users import PlainStreamUser
TEMPLATE = %r.encode()
N = itertools.count()
class Plain(PlainStreamUser):
    # the task is PlainStreamUser's (a second `stream` task here sent every other request as `{}`,
    # a cheap 400 that the old count took for a completion)
    abstract = False
    wait_time = constant(0)
    path = "/v1/completions"

    def body(self):
        return TEMPLATE %% next(N)

class Fixed(LoadTestShape):
    # ends the run as ours ends (chaos.load.shapes.FixedShape: USERS users until DURATION s after
    # the start); `-t` timed from before the users spawned and cut a round short on a busy host
    def tick(self):
        if self.get_run_time() >= float(os.environ["PLAIN_DURATION"]):
            return None
        users = int(os.environ["PLAIN_USERS"])
        return users, float(users)

_T = []
@events.test_start.add_listener
def _start(**_kw):
    _T[:] = [time.process_time(), time.perf_counter()]
@events.test_stop.add_listener
def _stop(**_kw):
    with open(os.environ["PLAIN_META"], "w") as f:
        json.dump({"cpu_s": time.process_time() - _T[0], "wall_s": time.perf_counter() - _T[1]}, f)
''' % PROMPT_JSON  # noqa: UP031 (generated Python: % keeps its braces literal)


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
    """The simulator if runnable (profile args given), else the test SSE server; both log ground truth."""

    def __init__(self, log: Path, *sim_args: str) -> None:
        self.log = log
        sim_args = sim_args or ("--profile", "instant")
        sim_ok = subprocess.run([sys.executable, "-m", "chaos.stack.sim", "--help"], capture_output=True,
                                timeout=30).returncode == 0
        if sim_ok:
            port = free_port()
            self.kind = "simulator (" + " ".join(sim_args) + ")"
            self.proc = subprocess.Popen([sys.executable, "-m", "chaos.stack.sim", "--port", str(port),
                                          *sim_args, "--request-log", str(log)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.url = f"http://127.0.0.1:{port}"
        else:
            self.kind = "tests/integration/load/sse_server.py (simulator not runnable yet)"
            self.proc = subprocess.Popen([sys.executable, str(REPO / "tests/integration/load/sse_server.py"), "--tokens",
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


def ours(url: str, users: int, duration: float, out: Path) -> tuple[float, float]:
    """(completions per wall second, per CPU second) of our user, from the load process's own meter."""
    res = run_load(url, out_dir=out, users=users, duration_s=duration, api="completions", classes=CLASSES,
                   max_tokens=MAX_TOKENS)
    n = sum(1 for r in res.records if r.ok)
    meta = res.client_cpu[0]
    return n / meta["wall_s"], n / meta["cpu_s"]


def plain_fasthttp(url: str, users: int, duration: float, tmp: Path) -> tuple[float, float]:
    lf = tmp / "plain_locustfile.py"
    lf.write_text(PLAIN)
    prefix = tmp / "plain"
    # the same stop as ours: run_load passes --stop-timeout, so a request in flight at the end completes
    subprocess.run([sys.executable, "-m", "locust", "-f", str(lf), "--headless", "--host", url,
                    "--stop-timeout", str(STOP_TIMEOUT_S), "--csv", str(prefix), "--only-summary",
                    "--loglevel", "WARNING", "--exit-code-on-error", "0"], cwd=REPO, timeout=duration + 60,
                   env=dict(os.environ, PLAIN_META=str(tmp / "plain-meta.json"), PLAIN_USERS=str(users),
                            PLAIN_DURATION=str(duration)),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(f"{prefix}_stats.csv") as f:
        row = [r for r in csv.DictReader(f) if r["Name"] == "Aggregated"][0]
    meta = json.loads((tmp / "plain-meta.json").read_text())
    # completions, as for ours (ok records only): a failed request is cheap and must not count
    n = int(row["Request Count"]) - int(row["Failure Count"])
    if int(row["Failure Count"]):
        print(f"  plain FastHttpUser: {row['Failure Count']} of {row['Request Count']} requests failed "
              f"(see {prefix}_failures.csv); only the completed ones count")
    return n / meta["wall_s"], n / meta["cpu_s"]


AIOHTTP = '''
import asyncio, sys, time, aiohttp
url, users, duration = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
TEMPLATE = %r
async def user(s, end, n):
    while time.monotonic() < end:
        body = TEMPLATE %% n[1]
        n[1] += 1
        async with s.post(url + "/v1/completions", data=body, headers={"content-type": "application/json"}) as r:
            async for _ in r.content:
                pass
        n[0] += 1
async def main():
    n = [0, 0]
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=users)) as s:
        t0, c0 = time.monotonic(), time.process_time()
        await asyncio.gather(*[user(s, t0 + duration, n) for _ in range(users)])
        print(n[0], time.monotonic() - t0, time.process_time() - c0)
asyncio.run(main())
''' % PROMPT_JSON  # noqa: UP031 (generated Python: % keeps its braces literal)


def plain_aiohttp(url: str, users: int, duration: float) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", AIOHTTP, url, str(users), str(duration)], capture_output=True,
                         text=True, timeout=duration + 60)
    n, wall, cpu = out.stdout.strip().splitlines()[-1].split()
    return int(n) / float(wall), int(n) / float(cpu)


WARMUP_S = 2.0
TTFT_SIM = ("--profile", "h200", "--time-scale", "8")
# A little above what 256 streams of 16 tokens serve at these step times (~440/s), so the 256
# users stay busy. Arrivals are Poisson: identical streams started together would finish together
# and resubmit as one burst every 17 steps, a lockstep no real traffic has.
TTFT_RATE = 450.0


def ttft_errors(records: list, log: Path, warmup_s: float = WARMUP_S) -> list[float]:
    """Client TTFT minus the server's, ms, for requests sent after the warm-up."""
    truth = {}
    for line in log.read_text().splitlines():
        if line.strip():
            e = json.loads(line)
            truth[e.get("request_id")] = e
    start = min((r.t_send for r in records), default=0.0) + warmup_s
    errs = []
    for r in records:
        t = truth.get(r.request_id)
        if r.ok and r.ttft is not None and r.t_send >= start and t and t.get("t_first_token"):
            errs.append(((r.t_send + r.ttft) - t["t_first_token"]) * 1000)
    return errs


def ttft_run(url: str, tmp: Path, name: str, duration: float, rate: float | None = None):  # noqa: ANN201
    """256 streams: closed loop, or Poisson arrivals at `rate` capped at 256 users in flight."""
    shape = dict(rate=rate, max_users=256) if rate else dict(users=256)
    return run_load(url, out_dir=tmp / name, duration_s=duration + WARMUP_S, api="completions",
                    classes=CLASSES, max_tokens=MAX_TOKENS, **shape)


def in_flight(records: list) -> float:
    """Mean number of streams in flight over the run (sum of E2E / span of send times)."""
    sends = [r.t_send for r in records]
    span = max(sends) - min(sends) if sends else 0.0
    return sum(r.e2e or 0.0 for r in records) / span if span > 0 else 0.0


def _row(label: str, errs: list[float], busy: float | None) -> str:
    if not errs:
        return f"{label:<44}{'no records matched the server log':>40}"
    p99 = percentile([abs(e) for e in errs], 99)
    b = f"{busy:.2f}" if busy is not None else "-"
    return f"{label:<44}{len(errs):>7}{percentile(errs, 50):>9.3f}{p99:>11.3f}{max(errs):>10.3f}{b:>8}"


def side_by_side(order: list, runs: dict, url: str, args: argparse.Namespace, reverse: bool) -> None:
    """Ours and the plain FastHttpUser at once (started together, in turn first), then aiohttp alone.

    Both then meet the same host at the same moments, so a busy spell of the shared host falls on
    both within the round instead of on one round of the two; each is still metered over its own
    users' run (they start within about a second of each other)."""
    import threading

    pair = [o for o in order if o[0] != "aio"]
    got: dict[str, tuple[float, float]] = {}

    def go(key: str, fn: Any, extra: Path) -> None:
        got[key] = fn(url, args.users, args.duration, extra)

    threads = [threading.Thread(target=go, args=o) for o in (pair[::-1] if reverse else pair)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for key in ("ours", "fast"):
        runs[key].append(got.get(key, (0.0, 0.0)))
    runs["aio"].append(plain_aiohttp(url, args.users, args.duration))


def throughput_table(runs: dict[str, list[tuple[float, float]]], args: argparse.Namespace,
                     load_after: float) -> tuple[dict[str, float], list[float]]:
    """Print the per-path table and the per-round ratio (before the TTFT runs, which a loaded host can cut short)."""
    print(f"{'client (' + str(args.users) + ' users, 1 process), ' + str(args.rounds) + ' rounds':<40}"
          f"{'per wall s':>12}{'per CPU s: median':>19}{'min-max':>16}")
    med: dict[str, float] = {}
    for name, key in (("ours (instrumented user)", "ours"), ("plain FastHttpUser", "fast"), ("plain aiohttp", "aio")):
        wall, cpu = [r[0] for r in runs[key]], [r[1] for r in runs[key]]
        med[key] = statistics.median(cpu)
        print(f"{name:<40}{statistics.median(wall):>12.0f}{med[key]:>19.0f}{f'{min(cpu):.0f}-{max(cpu):.0f}':>16}")
    ratios = [o[1] / f[1] for o, f in zip(runs["ours"], runs["fast"], strict=True) if f[1] > 0]
    if not ratios:
        raise SystemExit("plain FastHttpUser completed no request in any round")
    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [ratios[0]] * 3
    print(f"ours / plain FastHttpUser per CPU s (= on one core), per round: median {statistics.median(ratios):.2f}, "
          f"IQR {q[0]:.2f}-{q[2]:.2f}, min-max {min(ratios):.2f}-{max(ratios):.2f} "
          f"({' '.join(f'{r:.2f}' for r in ratios)})")
    print(f"host load average after the rounds: {load_after:.1f} (1 min)")
    sys.stdout.flush()
    return med, ratios


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=4.0)
    ap.add_argument("--users", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--side-by-side", action="store_true",
                    help="run ours and the plain FastHttpUser at the same time in each round (aiohttp alone after)")
    ap.add_argument("--short", action="store_true", help="1 round of 1 s per client: seconds, for CI")
    args = ap.parse_args()
    if args.short:
        args.rounds, args.duration = 1, 1.0
    tmp = Path(tempfile.mkdtemp(prefix="loadgen-"))
    log = tmp / "server-requests.jsonl"
    srv = Server(log)
    try:
        print(f"server: {srv.kind} at {srv.url}; {os.cpu_count()} cores on this host (server shares them); "
              f"load average {os.getloadavg()[0]:.1f}")
        runs: dict[str, list[tuple[float, float]]] = {"ours": [], "fast": [], "aio": []}
        for i in range(args.rounds):
            # interleaved, and each round in the reverse order of the last (ABC CBA ...): a slow spell
            # of the shared host falls on every path alike, and the per-round ratio compares
            # neighbours in time
            order = [("ours", ours, tmp / f"ours{i}"), ("fast", plain_fasthttp, tmp), ("aio", plain_aiohttp, None)]
            if args.side_by_side:
                side_by_side(order, runs, srv.url, args, reverse=i % 2 == 1)
                continue
            for key, fn, extra in (order if i % 2 == 0 else order[::-1]):
                runs[key].append(fn(srv.url, args.users, args.duration, *([extra] if extra else [])))
        load_after = os.getloadavg()[0]
        med, ratios = throughput_table(runs, args, load_after)
        saturated = ttft_run(srv.url, tmp, "ttft-instant", args.duration)
    finally:
        srv.stop()
    log2 = tmp / "server-requests-h200.jsonl"
    srv2 = Server(log2, *TTFT_SIM)
    try:
        paced = ttft_run(srv2.url, tmp, "ttft-h200", args.duration, rate=TTFT_RATE)
    finally:
        srv2.stop()
    errs, serrs = ttft_errors(paced.records, log2), ttft_errors(saturated.records, log)
    if not errs:
        raise SystemExit("no records matched the server's request log")
    p99 = percentile([abs(e) for e in errs], 99)
    print(f"TTFT error vs server log, ms, 256 streams{'':<4}{'n':>7}{'p50':>9}{'p99 |e|':>11}{'max':>10}{'busy':>8}")
    print(_row("h200 x8 (20-50 ms steps), Poisson", errs, paced.client_busy))
    print(_row("instant, closed loop, client CPU-bound", serrs, saturated.client_busy))
    print(f"mean streams in flight: {in_flight(paced.records):.0f} (h200 x8), "
          f"{in_flight(saturated.records):.0f} (instant); busy = the load process's CPU share")
    print(f"RESULT ours_per_s={med['ours']:.0f} fasthttp_per_s={med['fast']:.0f} aiohttp_per_s={med['aio']:.0f} "
          f"ttft_err_p99_ms={p99:.3f} ratio_median={statistics.median(ratios):.2f} "
          f"ratio_min={min(ratios):.2f} ratio_max={max(ratios):.2f}")


if __name__ == "__main__":
    main()
