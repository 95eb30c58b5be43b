"""Health truth measured live: SIGKILL of the last TP rank of a TP 2 replica (real vLLM where `make
setup-vllm` was run, and the simulator), watched by the scenario's probers; the rows say how long
/health and /v1/models claimed healthy while completions failed. vLLM 0.32 was recorded lying 9.6 s
(shared/reference/vllm-behaviour.md); the row reports whatever this run measures, against 5 s."""
from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from chaos.observe import CompletionProber, HealthProber, Timeline
from chaos.verify.health_truth import HEALTHY_LIE, compare, health_truth_rows
from chaos.verify.verdict import Verdict

START_S = 420.0


@pytest.mark.parametrize("backend", ["simulator", "vllm"])
def test_a_killed_tp_rank_and_what_health_claimed(tmp_path: Path, backend: str) -> None:
    from chaos.observe.completion import completion_ok
    from tests._fidelity import replica

    cfg, target = replica(tmp_path, backend)
    url = f"http://127.0.0.1:{cfg.port}"
    tl = Timeline()
    target.start()
    try:
        deadline = time.monotonic() + START_S  # a TP 2 vLLM beside other work on 2 cores: over 240 s once
        while not completion_ok(url, "sim-model", timeout=30):
            assert target.is_running() and time.monotonic() < deadline, f"{backend} did not serve: {target.logs(20)}"
            time.sleep(0.5)
        probes = [HealthProber(url, tl, interval_s=0.1), CompletionProber(url, tl, interval_s=0.3, timeout_s=2.0),
                  HealthProber(url, tl, interval_s=0.5, timeout_s=1.0, path="/v1/models")]
        probes[2].source = "models"
        for p in probes:
            p.start()
        try:
            time.sleep(3.0)
            ranks = target.rank_pids()
            assert len(ranks) >= 2, f"needs TP 2, found ranks {ranks}"
            t_kill = time.time()
            target.signal(ranks[-1], signal.SIGKILL)
            # vLLM: 9.6 s of /health 200 recorded, then 500s, then the watchdog's exit; the simulator dies at once
            time.sleep(25.0 if backend == "vllm" else 8.0)
        finally:
            for p in probes:
                p.stop()
    finally:
        target.remove()
    v = Verdict(f"health truth: tp-worker-sigkill on {backend}")
    health_truth_rows(v, tl, t_kill, 5.0, fault="tp-worker-sigkill")
    print("\n".join(r.line() for r in v.rows))
    row = v.row("health_truth /health")
    assert not row.unproven and row.ok is not None, row.line()  # the probes covered the fault: judged
    v.row("health_truth /v1/models")
    if backend == "vllm":  # the recorded lie: /health 200 while completions fail, from the kill on
        tr = compare(tl.series("health", "status"), tl.series("completion", "ok"))
        assert tr is not None
        lie = tr.longest(HEALTHY_LIE)
        assert lie is not None and t_kill - 0.5 <= lie.start <= t_kill + 3.0, row.line()
        assert row.measured >= lie.length and row.ok == (row.measured <= 5.0)
