"""The benchmarks that measure real vLLM, in their short mode with `--vllm`: they start it and print their RESULT
with figures (the integration lane runs them without vLLM, where those figures are "none")."""
from __future__ import annotations

import pytest

from tests._bench import RESULT_KEYS, result_line, run_short
from tests._vllm import require_vllm

TIMEOUT_S = 480.0  # one or two vLLM servers started (30-80 s each here) and a few requests


@pytest.mark.parametrize("script", ["engine_plugin.py", "vs_vllm_bench.py"])
def test_short_mode_with_vllm_prints_its_figures(script: str) -> None:
    require_vllm()
    rc, out, err = run_short(script, TIMEOUT_S, "--vllm")
    assert rc == 0, f"bench/{script} --short --vllm exited {rc}:\n{out[-3000:]}\n{err[-3000:]}"
    got = result_line(out)
    unmeasured = [k for k in RESULT_KEYS[script] if got.get(k, "none") == "none"]  # a missing key too
    assert not unmeasured, f"bench/{script} --short --vllm left {unmeasured} missing or none: {out.splitlines()[-1]!r}"
