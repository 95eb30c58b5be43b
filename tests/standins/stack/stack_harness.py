"""A harness run to be killed mid-fault: stack up, rank freeze + latency toxic injected, then it waits.

usage: python stack_harness.py ENV_FILE
Prints one line `READY {json}` (the frozen rank pid, the toxic names, the pidfile pids) and sleeps until
signalled. SIGTERM/SIGINT revert the faults (the ledger's signal handlers) and stop the stack.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from chaos.bridge import EmbeddedStack  # noqa: E402
from chaos.env import load  # noqa: E402
from chaos.faults import install_signal_handlers, latency, rank_freeze  # noqa: E402
from chaos.faults.base import Policy  # noqa: E402
from tests.standins.stack.stack_env import pidfile_pids  # noqa: E402


def main() -> None:
    env = load(sys.argv[1])
    install_signal_handlers()
    policy = Policy.for_env(env, verify_timeout_s=5.0)
    stack = EmbeddedStack(env, log=lambda s: print(f"harness: {s}", file=sys.stderr, flush=True))
    try:
        stack.up(60)
        freeze = rank_freeze(stack.target("replica-a"), rank=1).using(policy)
        freeze.inject()
        slow = latency(env.toxiproxy.api, "client", latency=1500).using(policy)
        slow.inject()
        info = {"frozen_pid": freeze.pid, "toxics": list(slow.toxic_names.values()),
                "pids": pidfile_pids(Path(env.state_dir)), "run_id": stack.run_id}
        print("READY " + json.dumps(info), flush=True)
        while True:
            time.sleep(0.2)
    finally:
        stack.down()


if __name__ == "__main__":
    main()
