"""Does the reference gateway's breaker window see the canary's errors as the replica and the clients do?

Issue 15 named a 2x gap between the gateway's window error share and the clients'. This holds a
steady 500 fault on the canary's fault proxy (even spread) under `chaos load`, samples the gateway's
canary window (GET /admin/state) every 0.5 s, and recounts the same 15 s windows from the fault
proxy's request log (the replica side's truth), the clients' records and the verdict's own
recomputation (chaos.verify.breaker.analyze). It prints one row per 4 s and the totals.

    CHAOS_PORT_OFFSET=4000 .venv/bin/chaos env up --env local &     # a stack of its own
    CHAOS_PORT_OFFSET=4000 .venv/bin/python scripts/window_share_check.py 0.005
"""
from __future__ import annotations

import bisect
import dataclasses
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from chaos.commands.gateway import _admin_call
from chaos.env import load
from chaos.load.records import RequestRecord
from chaos.verify.breaker import analyze

REPO = Path(__file__).resolve().parents[1]


def main(fraction: float, duration_s: float = 60.0) -> int:
    env = load("local")
    samples: list[tuple[float, dict]] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            samples.append((time.time(), _admin_call("local", None, None, "GET", "/admin/state")["pools"]["canary"]))
            time.sleep(0.5)

    py = sys.executable
    inject = subprocess.Popen([py, "-m", "chaos.cli", "fault", "inject", "http-error", "--env", "local", "--target",
                               "replica-c", "--param", "status=500", "--param", f"fraction={fraction}",
                               "--duration", str(duration_s + 15)], cwd=REPO, stdout=subprocess.DEVNULL)
    time.sleep(5)
    poller = threading.Thread(target=poll)
    poller.start()
    out = Path(tempfile.mkdtemp(prefix="window-share-"))
    try:
        subprocess.run([py, "-m", "chaos.cli", "load", "--env", "local", "--duration", str(duration_s), "--out", str(out)],
                       cwd=REPO, capture_output=True, check=True, timeout=duration_s + 120)
    finally:
        stop.set()
        poller.join()
        inject.wait()
    fields = {f.name for f in dataclasses.fields(RequestRecord)}
    clients = [RequestRecord(**{k: v for k, v in json.loads(line).items() if k in fields})
               for f in out.glob("*/records-*.jsonl") for line in f.read_text().splitlines() if line.strip()]
    verdict = analyze(clients, env.breaker).window
    grid = [w[0] for w in verdict]
    proxy = [json.loads(line) for line in (Path(env.state_dir) / "replica-c.proxy.jsonl").read_text().splitlines()
             if line.strip()]
    proxy = [r for r in proxy if str(r.get("path", "")).startswith("/v1/") and r.get("t_finish")]
    w_s = env.breaker.window_s
    print(f"canary at {fraction:.2%} 500s (even spread), {w_s:g} s windows\n")
    print("   t_s | gateway calls  share | fault proxy calls  share | verdict calls  share")
    worst = 0.0
    for t, c in samples[::8]:
        win = [r for r in proxy if t - w_s < r["t_finish"] <= t]
        bad = sum(1 for r in win if (r.get("status") or 0) >= 500)
        i = bisect.bisect_right(grid, t) - 1
        v = verdict[i] if i >= 0 else (t, 0, 0.0, None)
        gw = c["window"]
        p_share = bad / len(win) if win else 0.0
        if gw["calls"] >= env.breaker.min_calls and p_share:
            worst = max(worst, gw["error_rate"] / p_share)
        print(f"{t - samples[0][0]:6.1f} | {gw['calls']:13d} {gw['error_rate']:6.2%} | {len(win):17d} {p_share:6.2%} | "
              f"{v[1]:13d} {v[2]:6.2%}")
    can = [r for r in clients if (r.served_by or "").startswith("canary/")]
    can_bad = sum(1 for r in can if (r.status or 0) >= 500)
    prox_bad = sum(1 for r in proxy if (r.get("status") or 0) >= 500 and r["t_finish"] >= samples[0][0])
    prox_n = sum(1 for r in proxy if r["t_finish"] >= samples[0][0])
    print(f"\nclients: {can_bad}/{len(can)} canary answers were 5xx; fault proxy: {prox_bad}/{prox_n}")
    print(f"RESULT fraction={fraction} client_share={can_bad / max(1, len(can)):.4f} "
          f"proxy_share={prox_bad / max(1, prox_n):.4f} max_gateway_over_proxy={worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(float(sys.argv[1]) if len(sys.argv) > 1 else 0.005))
