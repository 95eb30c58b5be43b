"""A harness process for the proof test: injects every kind of fault in a loop until it is signalled.

usage: python proof_harness.py STATE_DIR TOXI_API PROXY PORT SEED [CONTAINER]
"""
from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from chaos.faults import down, install_signal_handlers, latency, pause, rank_freeze, reset_peer  # noqa: E402
from chaos.faults.base import Policy  # noqa: E402
from chaos.faults.ledger import Ledger  # noqa: E402
from chaos.targets.process import ProcessTarget  # noqa: E402

TINY = str(Path(__file__).resolve().parents[2] / "integration" / "targets" / "tinyserver.py")


def main() -> None:
    state, api, proxy, port, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    container = sys.argv[6] if len(sys.argv) > 6 else None
    rng = random.Random(seed)
    install_signal_handlers()
    policy = Policy(ledger=Ledger(state), verify_timeout_s=3.0)
    t = ProcessTarget("proof", [sys.executable, TINY, str(port), "--ranks", "2"], port=port, state_dir=state)
    targets = [t]
    try:
        t.start()
        t.wait_healthy(10)
        import time

        deadline = time.monotonic() + 10  # both ranks up before the first rank freeze
        while len(t.rank_pids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        network = [lambda: latency(api, proxy, latency=30), lambda: reset_peer(api, proxy), lambda: down(api, proxy)]
        kinds = [lambda: rank_freeze(t, rank=1), lambda: pause(t)]
        if container:
            from chaos.targets.docker import DockerTarget

            d = DockerTarget("proof-docker", "unused", port=0, container_name=container, run_id="proof", state_dir=state)
            kinds.append(lambda: pause(d))
        print("ready", flush=True)
        while True:
            # at most one fault per aim: overlapping signal faults on one process tree undo each other
            # (a group SIGCONT continues a frozen rank), which revert reports loudly as a lapse
            choice = rng.randrange(3)
            net, tgt = rng.choice(network)(), rng.choice(kinds)()
            fault = net if choice == 0 else tgt if choice == 1 else net & tgt
            with fault.using(policy):
                import time

                time.sleep(rng.uniform(0.0, 0.3))
    finally:
        for x in targets:
            x.stop(3)


if __name__ == "__main__":
    main()
