#!/usr/bin/env python3
"""Does the breaker suite hold on a noisy machine? Runs `pytest suites/breaker --env ENV` N times in
a row, every other run while a bounded CPU burner keeps one core busy, and prints one row per run.

    .venv/bin/python scripts/breaker_stability.py [--env local] [--runs 10] [--burn every-other|all|none]

The burner is a child process spinning for at most the run's own deadline; it is stopped when the
run ends, on Ctrl-C and on SIGTERM. Last line: RESULT runs=.. passed=.. passed_with_burner=.. burner_runs=..
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN_LIMIT_S = 1800  # one suite run; the burner never outlives it
BURN = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    pass\n"


def burner() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", BURN.format(limit=RUN_LIMIT_S)], start_new_session=True)


def one_run(env: str, burn: bool, results: Path) -> tuple[bool, str, float]:
    spin = burner() if burn else None
    t0 = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "suites/breaker", "--env", env, "-q",
                               "-p", "no:cacheprovider", f"--alluredir={results}"], cwd=ROOT, capture_output=True,
                              text=True, timeout=RUN_LIMIT_S)
        tail = [l for l in proc.stdout.splitlines() if re.search(r"\d+ (passed|failed|skipped|error)", l)]
        failed = [l.split(" - ")[0] for l in proc.stdout.splitlines() if l.startswith(("FAILED", "ERROR"))]
        return proc.returncode == 0, (tail[-1] if tail else f"exit {proc.returncode}") + \
            (f" ({'; '.join(failed)})" if failed else ""), time.monotonic() - t0
    finally:
        if spin is not None:
            os.killpg(spin.pid, signal.SIGKILL)
            spin.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="local")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--burn", choices=("every-other", "all", "none"), default="every-other")
    a = ap.parse_args()
    if a.runs < 1:
        ap.error("--runs: expected a positive count")
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    rows = []
    print(f"{'run':>3}  {'burner':6}  {'wall s':>7}  result")
    for i in range(a.runs):
        burn = a.burn == "all" or (a.burn == "every-other" and i % 2 == 1)
        ok, said, wall = one_run(a.env, burn, ROOT / "reports" / f"stability-{i}")
        rows.append((ok, burn))
        print(f"{i + 1:>3}  {'yes' if burn else 'no':6}  {wall:7.0f}  {'PASS' if ok else 'FAIL'}: {said}", flush=True)
    passed = sum(ok for ok, _ in rows)
    with_burner = sum(ok for ok, burn in rows if burn)
    print(f"RESULT runs={len(rows)} passed={passed} passed_with_burner={with_burner} "
          f"burner_runs={sum(b for _, b in rows)}")
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
