"""llm-chaos's engine plugin for vLLM: faults inside the real engine, armed through a control directory.

vLLM calls `register()` in each of its processes (entry point group `vllm.general_plugins`). It does
nothing unless the process's environment names a control directory in LLM_CHAOS_ENGINE_FAULTS; then
it wraps a few engine methods (chaos_engine_plugin.hooks), which read the directory's armed faults
(chaos_engine_plugin.control) at most every 50 ms. Standard library only: it is imported inside
vLLM's venv or image, where the harness's own dependencies are not installed.
"""
from __future__ import annotations

import os

from chaos_engine_plugin.control import ENV_VAR, Control

__all__ = ["ENV_VAR", "register"]

_registered = False


def register() -> None:
    """vLLM's general-plugin entry point: inert without LLM_CHAOS_ENGINE_FAULTS; else install the hooks."""
    global _registered
    directory = os.environ.get(ENV_VAR)
    if not directory or _registered:
        return
    _registered = True
    from chaos_engine_plugin import hooks

    hooks.install(Control(directory))
