"""The all-reduce hang's gate survives torch.compile (vLLM's own torch, no vLLM start): it runs at every
call of a fullgraph-compiled forward, holds it while armed, and leaves eager code as it was."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests._support import REPO
from tests._vllm import require_vllm
from tests.vllm.engine_plugin._replica import VLLM_PY


def test_the_gate_is_a_run_time_op_of_the_compiled_graph():
    require_vllm()
    probe = Path(__file__).with_name("_gate_probe.py")
    out = subprocess.run([str(VLLM_PY), str(probe), str(REPO)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    # traced once, yet its Python body ran at each of the compiled calls: the decision is not baked in
    assert r["op_in_code"] and r["compiled_calls"] == r["runs"], r
    assert r["same"] and r["eager_calls"] == 1, r
    # armed: the compiled call was held (max_s 1.5), and the fault recorded its firing
    assert 1.4 <= r["held_s"] < 10 and any(n.startswith("hang.fired.") for n in r["fired"]), r
