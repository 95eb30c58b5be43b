"""How many trials the resilience capacity search needs, and how long it takes, on this machine.

Runs `chaos capacity --env local --fault restart` (the embedded stack, started and stopped by the
command; a replica restarted under Poisson load at each rate, two trials a rate plus a no-fault
control) and prints its table: per offered rate, the trials that recovered within the recovery
SLA, the slowest recovery, and goodput and P99 with and without the fault. The capacity is the
highest rate at which every trial recovered; with no failing rate below --max-rate it is that
ceiling, and the line says so. The search must finish within 15 minutes here (its budget is 14).

Last line: `RESULT capacity_rps=.. trials=.. wall_s=.. ran_out=..`.
    .venv/bin/python bench/capacity.py [--env local] [--fault restart] [--min-rate 8] [--max-rate 256] [--trials 2]
`--short` (CI: about a minute, figures not judged): one rate (8/s), one trial and its control, the fault held 1 s.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="local")
    ap.add_argument("--fault", default="restart")
    ap.add_argument("--min-rate", default="8")
    ap.add_argument("--max-rate", default="256")
    ap.add_argument("--trials", default="2")
    ap.add_argument("--budget", default="840")
    ap.add_argument("--short", action="store_true", help="one rate, one trial, no refinement: for CI")
    a = ap.parse_args()
    extra: list[str] = []
    if a.short:
        a.min_rate = a.max_rate = "8"
        a.trials, a.budget, extra = "1", "120", ["--hold", "1", "--refine", "0"]
    out = REPO / "reports" / "capacity-bench"
    t0 = time.monotonic()
    cmd = [sys.executable, "-m", "chaos.cli", "capacity", "--env", a.env, "--fault", a.fault, "--min-rate", a.min_rate,
           "--max-rate", a.max_rate, "--trials", a.trials, "--budget", a.budget, *extra, "--out", str(out)]
    rc = subprocess.call(cmd, cwd=REPO)
    wall = time.monotonic() - t0
    runs = sorted(out.glob("*/capacity.json"))
    if rc != 0 or not runs:
        print(f"RESULT capacity_rps=none trials=0 wall_s={wall:.0f} ran_out=unknown (chaos capacity exit {rc})")
        return 1
    doc = json.loads(runs[-1].read_text())
    print(f"RESULT capacity_rps={doc['capacity_rps']} trials={doc['trials']} wall_s={wall:.0f} "
          f"ran_out={str(doc['ran_out_of_budget']).lower()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
