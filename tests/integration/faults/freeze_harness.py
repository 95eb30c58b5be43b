"""A harness run to be SIGKILLed mid-fault: freezes one rank of a replica it did not start, then waits.

usage: CHAOS_ENV=ENV_FILE python freeze_harness.py RANK_PID
It loads the environment CHAOS_ENV names (relative to its working directory, as a run started in the
project root would), records the freeze in that environment's ledger, prints READY and sleeps.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from chaos.env import load  # noqa: E402
from chaos.faults import rank_freeze  # noqa: E402
from chaos.faults.base import Policy  # noqa: E402
from chaos.targets.process import ProcessTarget  # noqa: E402


def main() -> None:
    env = load(os.environ["CHAOS_ENV"])
    replica = ProcessTarget("tiny", [], port=0, state_dir=env.state_dir)  # a handle: signals by pid only
    rank_freeze(replica, rank=1, pid=int(sys.argv[1])).using(Policy.for_env(env)).inject()
    print("READY", flush=True)
    while True:
        time.sleep(0.2)


if __name__ == "__main__":
    main()
