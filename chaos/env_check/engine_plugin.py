"""Which vLLM each engine-plugin replica runs, and whether the plugin supports it (`chaos env check`).

Read from the replica's own `GET /version` (vLLM serves `{"version": "0.32.0"}`), so it works wherever the
replica runs; the plugin's supported versions are chaos_engine_plugin.versions.SUPPORTED_VLLM. Where the
plugin's control directory is on this host (process targets, and Docker ones, which mount the state directory at
the same path), its own newest registration has the last word: a vLLM build may name itself otherwise than its
module does. On another version the plugin patches nothing and each engine scenario is "not proven"
(chaos.faults.engine_plugin).
"""
from __future__ import annotations

from pathlib import Path

from chaos.env import Environment, Target
from chaos.env_check.http import Probe, get
from chaos_engine_plugin.control import UNSUPPORTED, registered
from chaos_engine_plugin.versions import SUPPORTED_VLLM, shown, unsupported


def plugin_targets(env: Environment) -> list[Target]:
    """The targets that run real vLLM with the engine plugin on (vllm.engine_faults: true)."""
    return [t for t in env.targets if t.backend == "vllm" and t.vllm is not None and t.vllm.engine_faults]


def registration(state_dir: str | None, t: Target) -> tuple[str, str | None] | None:
    """What the replica's newest plugin registration says (chaos_engine_plugin.control.registered), where its
    control directory is on this host; None where it is not, or no process registered yet."""
    if not state_dir:
        return None
    directory = Path(state_dir).resolve() / "engine-faults" / t.name
    try:
        names = sorted((p for p in directory.iterdir()), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return None
    return registered([p.name for p in names])


def check_engine_plugin(t: Target, timeout: float, state_dir: str | None = None) -> Probe:
    """The replica's vLLM version from /version, and the plugin's own registration in `state_dir` where it is on
    this host: ok where the engine plugin supports it."""
    url = f"http://{t.host}:{t.port}/version"
    answer = get(url, timeout)
    doc = answer.json() if answer.status == 200 else None
    version = doc.get("version") if isinstance(doc, dict) else None
    if not isinstance(version, str):
        got = answer.got() if answer.status != 200 else "no version in its answer"
        return Probe(f"engine plugin on {t.name}", url, False, f"vLLM version unknown: expected {{\"version\": ...}}; "
                                                                f"got {got}")
    why = unsupported(version)
    said = registration(state_dir, t)
    if why is None and said is not None and said[0] == UNSUPPORTED:
        why = f"{unsupported(said[1])}, says the plugin's registration (GET /version: {version})"
    if why is not None:
        return Probe(f"engine plugin on {t.name}", url, False,
                     f"{why}: its engine scenarios are not proven here")
    return Probe(f"engine plugin on {t.name}", url, True,
                 f"vLLM {shown(version)} supported (supports {', '.join(SUPPORTED_VLLM)})")


def engine_plugin_lines(env: Environment, timeout: float) -> list[str]:
    """One line per engine-plugin target: "engine plugin: vLLM X.Y not supported (supports 0.32) ..."."""
    out = []
    for t in plugin_targets(env):
        p = check_engine_plugin(t, timeout, env.state_dir)
        out.append(f"engine plugin: {p.detail} ({t.name}, GET {p.address})")
    return out
