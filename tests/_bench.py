"""The benchmarks' RESULT lines for the harness's own tests: the keys each bench/ script prints, and a parser."""
from __future__ import annotations

import os
import subprocess
import sys

from tests._support import REPO

BENCH = REPO / "bench"

# script -> the keys of its RESULT line (the issue that asked for each figure named them)
RESULT_KEYS: dict[str, tuple[str, ...]] = {
    "capacity.py": ("capacity_rps", "trials", "wall_s", "ran_out"),
    "engine_plugin.py": ("disarmed_step_overhead_pct", "step_ms", "hook_us_per_step", "ab_overhead_pct",
                         "ab_spread_pct"),
    "faultproxy.py": ("added_p50_ms", "added_p99_ms", "throughput_ratio", "toxiproxy_ratio"),
    "faults.py": ("toxic_apply_ms", "rank_freeze_ms", "container_restart_s"),
    "gateway.py": ("added_p50_ms", "added_p99_ms", "throughput_ratio", "gateway_cpu_us_per_req"),
    "loadgen.py": ("ours_per_s", "fasthttp_per_s", "aiohttp_per_s", "ttft_err_p99_ms", "ratio_median",
                   "ratio_min", "ratio_max"),
    "sim_bench.py": ("completions_per_s", "emission_p99_ms", "short_tok_s", "short_p99_ms", "long_tok_s",
                     "long_p99_ms"),
    "vs_vllm_bench.py": ("ttft_p50_rel_err", "ttft_p99_rel_err", "itl_p50_rel_err", "ours_max_rps_per_core",
                         "vllm_bench_max_rps_per_core", "within_target"),
}


def result_line(out: str) -> dict[str, str]:
    """The key=value pairs of the last line, which must start with RESULT."""
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines, "no output"
    last = lines[-1].split()
    assert last[0] == "RESULT", f"last line is not a RESULT line: {lines[-1]!r}"
    pairs = dict(p.split("=", 1) for p in last[1:] if "=" in p)
    assert len(pairs) == len(last) - 1, f"RESULT line has a field that is not key=value: {lines[-1]!r}"
    return pairs


def run_short(script: str, timeout_s: float, *flags: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `bench/<script> --short [flags]` with `env` added to the environment;
    subprocess.TimeoutExpired past timeout_s."""
    done = subprocess.run([sys.executable, str(BENCH / script), "--short", *flags], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout_s, env={**os.environ, **(env or {})})
    return done.returncode, done.stdout, done.stderr
