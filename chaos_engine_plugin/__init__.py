"""llm-chaos's engine plugin for vLLM: faults inside the real engine, armed through a control directory.

vLLM calls `register()` in each of its processes (entry point group `vllm.general_plugins`). It does
nothing unless the process's environment names a control directory in LLM_CHAOS_ENGINE_FAULTS; then,
on a vLLM version it supports (chaos_engine_plugin.versions), it wraps a few engine methods
(chaos_engine_plugin.hooks), which read the directory's armed faults (chaos_engine_plugin.control) at
most every 50 ms. On any other version it patches nothing, logs one line why and writes
`unsupported.<pid>.<version>` into the directory, where the harness reads it. Standard library only: it is imported inside
vLLM's venv or image, where the harness's own dependencies are not installed.
"""
from __future__ import annotations

import os

from chaos_engine_plugin.control import ENV_VAR, Control
from chaos_engine_plugin.versions import SUPPORTED_VLLM, installed_vllm, unsupported

__all__ = ["ENV_VAR", "SUPPORTED_VLLM", "register"]

_registered = False


def register() -> None:
    """vLLM's general-plugin entry point: inert without LLM_CHAOS_ENGINE_FAULTS; else install the hooks
    on a supported vLLM, or on any other say why not (one log line, the control directory) and patch nothing."""
    global _registered
    directory = os.environ.get(ENV_VAR)
    if not directory or _registered:
        return
    _registered = True
    version = installed_vllm()
    why = unsupported(version)
    if why is not None:
        _refuse(Control(directory), version, why)
        return
    _own_compile_cache()
    from chaos_engine_plugin import hooks

    hooks.install(Control(directory))


def _refuse(ctl: Control, version: str | None, why: str) -> None:
    """Another vLLM: its internals may differ from what the hooks wrap, so none is installed (never a crash)."""
    import logging

    try:
        ctl.mark_unsupported(version)
    finally:
        logging.getLogger("vllm.llm_chaos").warning(
            "llm-chaos engine plugin: %s: no engine fault is installed in pid %d", why, os.getpid())


CACHE_SUBDIR = "llm-chaos-plugin"


def _own_compile_cache() -> None:
    """Give this replica's compiled graphs a cache of their own (VLLM_CACHE_ROOT/llm-chaos-plugin).

    vLLM's AOT compile cache (torch >= 2.10) is keyed by the config, not by the code traced: a graph
    compiled without the plugin would be loaded by a replica with it, without the all-reduce gate, and
    the hang would silently never fire (the other way round, the gated graph fails to load where the
    plugin is off, and vLLM recompiles). vLLM leaves VLLM_CACHE_ROOT out of its keys, so a separate
    root keeps the two apart. The API server calls this first: the engine and the ranks inherit it."""
    root = os.environ.get("VLLM_CACHE_ROOT") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "vllm")
    if os.path.basename(os.path.normpath(root)) != CACHE_SUBDIR:
        os.environ["VLLM_CACHE_ROOT"] = os.path.join(root, CACHE_SUBDIR)
