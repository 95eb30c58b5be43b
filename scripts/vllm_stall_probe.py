#!/usr/bin/env python3
"""Where does a stalled real-vLLM replica wait? Brings up an environment's stack (default
local-vllm), drives its load through the gateway, and sends one short completion at a time
straight to one replica (default replica-a, the TP 2 one). When a probe has been in flight for
`--stall-s`, py-spy dumps every process of that replica (at most `--dumps` times), so the stacks
show what each was waiting on. Prints the probes' latency table; last line:
RESULT probes=.. stalls=.. longest_s=.. dumps=..

    .venv/bin/python scripts/vllm_stall_probe.py [--env local-vllm] [--replica replica-a] [--seconds 240]
        [--users N] [--py-spy PATH] [--out reports/stall-probe]     (py-spy: `pip install py-spy`)

Bounded: the load and the probe loop end after --seconds, every request has a timeout, and the
stack is taken down on the way out (Ctrl-C included)."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def probe_once(url: str, model: str, timeout: float) -> tuple[float, str]:
    body = json.dumps({"model": model, "prompt": "ping " * 8, "max_tokens": 16, "temperature": 0}).encode()
    req = urllib.request.Request(f"{url}/v1/completions", data=body, headers={"Content-Type": "application/json"})
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            r.read()
            return time.monotonic() - t0, str(r.status)
    except Exception as e:  # noqa: BLE001 - a probe reports whatever went wrong
        return time.monotonic() - t0, type(e).__name__


def dump(py_spy: str, pids: list[tuple[int, str]], out: Path, n: int, age: float) -> None:
    with (out / f"dump-{n}.txt").open("w") as f:
        f.write(f"# probe in flight for {age:.1f} s\n")
        for pid, title in pids:
            f.write(f"\n===== pid {pid}: {title[:120]}\n")
            r = subprocess.run([py_spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30)
            f.write(r.stdout or r.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="local-vllm")
    ap.add_argument("--replica", default="replica-a")
    ap.add_argument("--seconds", type=float, default=240.0)
    ap.add_argument("--users", type=int, default=0, help="load users (default: the environment's)")
    ap.add_argument("--stall-s", type=float, default=3.0)
    ap.add_argument("--dump-after-s", type=float, default=0.0, help="dump only probes in flight this long (default: --stall-s)")
    ap.add_argument("--dumps", type=int, default=3)
    ap.add_argument("--py-spy", default="py-spy")
    ap.add_argument("--out", default=str(ROOT / "reports" / "stall-probe"))
    a = ap.parse_args()
    from chaos.bridge import EmbeddedStack
    from chaos.env import load
    from chaos.load.runner import start_load

    env = load(a.env)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stack = EmbeddedStack(env).up()
    handle = None
    try:
        target = stack.target(a.replica)
        url = f"http://127.0.0.1:{target.port}" if hasattr(target, "port") else env.endpoints.api
        p = env.load
        handle = start_load(env.endpoints.api, out_dir=out / "load", users=a.users or p.users, duration_s=a.seconds,
                            mix=dict(p.mix), classes=dict(p.classes), model=env.endpoints.model, max_tokens=p.max_tokens)
        inflight: list[float] = []
        lat: list[tuple[float, float, str]] = []
        dumps = [0]
        stop = threading.Event()

        def watch() -> None:
            while not stop.wait(0.5):
                if inflight and time.monotonic() - inflight[0] >= (a.dump_after_s or a.stall_s) and dumps[0] < a.dumps:
                    procs = target.processes()
                    dumps[0] += 1
                    dump(a.py_spy, procs, out, dumps[0], time.monotonic() - inflight[0])
                    while inflight and not stop.is_set():  # one dump per stall
                        time.sleep(0.2)

        threading.Thread(target=watch, daemon=True).start()
        end = time.monotonic() + a.seconds
        while time.monotonic() < end:
            inflight[:] = [time.monotonic()]
            took, status = probe_once(url, env.endpoints.model, timeout=60)
            inflight.clear()
            lat.append((time.time(), took, status))
            time.sleep(0.5)
        stop.set()
    finally:
        if handle is not None:
            handle.stop()
        stack.down()
    took = sorted(t for _, t, _ in lat)
    stalls = [t for t in took if t >= a.stall_s]
    print(f"{'probes':>8} {'p50 s':>7} {'p90 s':>7} {'max s':>7} {'>= stall':>9}")
    print(f"{len(took):>8} {took[len(took) // 2]:>7.2f} {took[int(len(took) * 0.9)]:>7.2f} {took[-1]:>7.2f} {len(stalls):>9}")
    print("stalls (s):", " ".join(f"{t:.1f}" for t in stalls))
    (out / "probes.json").write_text(json.dumps(lat))
    print(f"RESULT probes={len(took)} stalls={len(stalls)} longest_s={took[-1]:.2f} dumps={dumps[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
