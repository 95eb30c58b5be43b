"""How long each fault takes from call to proven-in-effect, and from revert to healthy.

Real toxiproxy-server, real local processes, real local Docker engine. Last line:
RESULT toxic_apply_ms=<n> rank_freeze_ms=<n> container_restart_s=<n>
    .venv/bin/python bench/faults.py [--short]
`--short` (CI: seconds, figures not judged): each fault twice, the container restart once.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chaos.faults import latency, rank_freeze, restart  # noqa: E402
from chaos.faults.base import Policy  # noqa: E402
from chaos.faults.ledger import Ledger  # noqa: E402
from chaos.stack.toxiproxy import ToxiproxyServer  # noqa: E402
from chaos.targets.process import ProcessTarget  # noqa: E402
from tests._support import free_port  # noqa: E402

TINY = Path(__file__).resolve().parents[1] / "tests" / "integration" / "targets" / "tinyserver.py"


class _H(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *a: object) -> None:
        pass


def bench_toxic(policy: Policy, n: int) -> tuple[list[float], list[float]]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    apply, revert = [], []
    try:
        with ToxiproxyServer("127.0.0.1", free_port()) as toxi:
            toxi.client().create_proxy("bench", f"127.0.0.1:{free_port()}", f"127.0.0.1:{srv.server_address[1]}")
            for _ in range(n):
                f = latency(toxi.api, "bench", latency=50).using(policy)
                f.inject()
                f.revert()
                apply.append(f.times["inject_to_effect_s"] * 1000)
                revert.append(f.times["revert_s"] * 1000)
    finally:
        srv.shutdown()
        srv.server_close()
    return apply, revert


def bench_rank_freeze(policy: Policy, state: Path, n: int) -> tuple[list[float], list[float]]:
    port = free_port()
    t = ProcessTarget("bench", [sys.executable, str(TINY), str(port), "--ranks", "2"], port=port, state_dir=state)
    apply, revert = [], []
    try:
        t.start()
        t.wait_healthy(15)
        deadline = time.monotonic() + 10
        while len(t.rank_pids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        for _ in range(n):
            f = rank_freeze(t, rank=1).using(policy)
            f.inject()
            f.revert()
            apply.append(f.times["inject_to_effect_s"] * 1000)
            revert.append(f.times["revert_s"] * 1000)
    finally:
        t.remove()
    return apply, revert


def bench_container_restart(policy: Policy, state: Path, n: int) -> list[float]:
    try:
        from chaos.targets.docker import DockerTarget
        from chaos.targets.docker_client import client_for

        client_for(None).images.get("llm-chaos-base:bookworm")
    except Exception as e:
        print(f"docker: skipped ({type(e).__name__})")
        return []
    port = free_port()
    t = DockerTarget("bench", "llm-chaos-base:bookworm", args=["python3", "-c", TINY.read_text(), str(port)], port=port,
                     run_id=uuid.uuid4().hex[:8], state_dir=state)
    out = []
    try:
        t.start()
        t.wait_healthy(30)
        for _ in range(n):
            f = restart(t, recover_timeout_s=60).using(policy)
            f.inject()
            f.revert()
            out.append(f.times["inject_to_effect_s"])
    finally:
        t.remove()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--short", action="store_true", help="each fault twice, one restart: seconds, for CI")
    short = ap.parse_args().short
    n, restarts = (2, 1) if short else (5, 3)  # injections per fault, container restarts
    with tempfile.TemporaryDirectory() as d:
        state = Path(d)
        policy = Policy(ledger=Ledger(state / "ledger"), verify_timeout_s=10)
        toxic, toxic_rev = bench_toxic(policy, n)
        freeze, freeze_rev = bench_rank_freeze(policy, state, n)
        restart_s = bench_container_restart(policy, state, restarts)
    med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
    print(f"{'fault':<22}{'call->in effect':>18}{'revert':>14}{'n':>4}")
    print(f"{'latency toxic (ms)':<22}{med(toxic):>18.1f}{med(toxic_rev):>14.1f}{len(toxic):>4}")
    print(f"{'rank-freeze (ms)':<22}{med(freeze):>18.2f}{med(freeze_rev):>14.2f}{len(freeze):>4}")
    print(f"{'container restart (s)':<22}{med(restart_s):>18.2f}{'-':>14}{len(restart_s):>4}")
    print("toxic time includes the proof: API listing + a probe through the proxy that sees the 50 ms delay;")
    print("container restart is call -> restart count up and the new process answering /health.")
    print(f"RESULT toxic_apply_ms={med(toxic):.1f} rank_freeze_ms={med(freeze):.2f} container_restart_s={med(restart_s):.2f}")


if __name__ == "__main__":
    main()
