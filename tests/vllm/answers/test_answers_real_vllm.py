"""The answers verdict on real vLLM (`local-vllm`: real `vllm serve` replicas behind the gateway and the fault
proxies): a replica restart keeps every greedy, seeded answer as the steady state gave it, and a planted 2 %
corruption fails the verdict naming requests the proxies corrupted. The same demo suite as on the simulator
(tests/e2e/verify/test_answers_e2e.py), with the golden waits long enough for real vLLM's rate on CPU (about
5 req/s here): 600 answers before the fault and as many after let 2 % stand out at 99 %.

Skips without `.tools/vllm` (`make setup-vllm`); CHAOS_REQUIRE=vllm makes that a failure."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests._support import REPO, require
from tests._vllm import require_vllm
from tests.e2e.verify.test_answers_e2e import run_demo

GOLDEN_S = 240.0  # each golden wait, before and after the fault: 600 answers at 2.5 req/s or more


@pytest.mark.slow
@pytest.mark.timeout(2500)
def test_on_real_vllm_a_restart_passes_the_answers_verdict_and_planted_corruption_fails_it(tmp_path: Path) -> None:
    require_vllm()
    require("toxiproxy")
    run_demo(tmp_path, str(REPO / "environments" / "local-vllm.yaml"), timeout_s=2400, golden_s=GOLDEN_S)
