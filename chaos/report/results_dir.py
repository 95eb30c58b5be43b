"""Files Allure reads from the results directory: environment.properties and categories.json."""
from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from chaos import __version__
from chaos.env.model import Environment
from chaos.errors import ConfigError
from chaos.report.redaction import redact, register_secret

# first match wins in Allure 3, every match counts in Allure 2: keep the rules disjoint.
# Regexes must work in both Java (full match) and JavaScript (search), hence [\s\S]* and no inline flags.
CATEGORIES: list[dict[str, Any]] = [
    # a game day's experiments (chaos/experiment/report.py): their status word leads the message
    {"name": "Aborted experiments (the abort guard fired)", "matchedStatuses": ["broken"],
     "messageRegex": r"^ABORTED[\s\S]*"},
    {"name": "Stopped experiments (an emergency stop)", "matchedStatuses": ["broken"],
     "messageRegex": r"^STOPPED[\s\S]*"},
    {"name": "SLA breaches", "matchedStatuses": ["failed"],
     "messageRegex": r"[\s\S]*SLOViolation[\s\S]*"},
    {"name": "Failed checks (plain assertions)", "matchedStatuses": ["failed"],
     "messageRegex": r"^(?![\s\S]*SLOViolation)[\s\S]*"},
    {"name": "Fault not effective (the fault never took hold)", "matchedStatuses": ["broken"],
     "messageRegex": r"[\s\S]*FaultNotEffective[\s\S]*"},
    {"name": "Harness errors (config, target, fault, stack, load, safety)", "matchedStatuses": ["broken"],
     "messageRegex": r"^(?!ABORTED|STOPPED)(?![\s\S]*FaultNotEffective)[\s\S]*chaos\.errors\.\w+[\s\S]*"},
    {"name": "Broken tests (unexpected exceptions)", "matchedStatuses": ["broken"],
     "messageRegex": r"^(?!ABORTED|STOPPED)(?![\s\S]*chaos\.errors\.)[\s\S]*"},
    # too few calls to tell the tiers apart (chaos/verify/power.py): neither a pass nor a fail
    {"name": "Inconclusive (the sample cannot decide the verdict)", "matchedStatuses": ["skipped"],
     "messageRegex": r"[\s\S]*INCONCLUSIVE[\s\S]*"},
]


def _results(results_dir: str | Path) -> Path:
    p = Path(results_dir)
    if p.exists() and not p.is_dir():
        raise ConfigError(f"allure results dir {p}: exists and is not a directory")
    p.mkdir(parents=True, exist_ok=True)
    return p


def write_categories(results_dir: str | Path) -> Path:
    """Write categories.json separating SLA breaches from harness errors and broken tests."""
    path = _results(results_dir) / "categories.json"
    path.write_text(json.dumps(CATEGORIES, indent=2), encoding="utf-8")
    return path


def _safe_url(url: str | None) -> str:
    """A URL without user:password@ (credentials never reach the report)."""
    if not url:
        return "-"
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        parts = parts._replace(netloc=netloc)
    return urlunsplit(parts)


def environment_properties(env: Environment, extra: Mapping[str, Any] | None = None) -> dict[str, str]:
    """What a reader needs to know about the run's environment; never a key, token or secret."""
    s, r, b, ld = env.slas, env.retry, env.breaker, env.load
    props: dict[str, Any] = {
        "environment": env.name,
        "description": env.description,
        "embedded": env.embedded,
        "time_scale": env.time_scale,
        "api": _safe_url(env.endpoints.api),
        "model": env.endpoints.model,
        "targets": ", ".join(f"{t.name} ({t.kind}, {t.pool}, tp={t.tp_size}, restart={t.restart_policy})"
                             for t in env.targets) or "-",
        "sla.recovery_s": s.recovery_s,
        "sla.steady_state_s": s.steady_state_s,
        "sla.cold_start_s": s.cold_start_s,
        "sla.error_budget": s.error_budget,
        "sla.degraded_latency_factor": s.degraded_latency_factor,
        "sla.max_retry_amplification": s.max_retry_amplification,
        "retry.min_interval_s": r.min_interval_s,
        "retry.multiplier": r.multiplier,
        "retry.max_attempts": r.max_attempts,
        "breaker.degrade": f"error rate >= {b.degrade_error_rate:g} or p99 >= {b.degrade_latency_s:g} s",
        "breaker.rollback_error_rate": b.rollback_error_rate,
        "breaker.window": f"{b.window_s:g} s, min {b.min_calls} calls",
        "breaker.hmac_signing": "on" if b.hmac_key_env else "off",
        "load": f"{ld.shape}, {ld.users} users, {ld.duration_s:g} s, mix {ld.mix}",
        "safety.protected": env.safety.protected,
        "client_commands": ", ".join(sorted(env.client_commands)) or "-",
        "harness": f"llm-chaos {__version__}",
        "python": platform.python_version(),
    }
    for name, cls in sorted(s.latency.items()):
        props[f"sla.latency.{name}"] = f"ttft p99 {cls.ttft_p99_s:g} s, e2e p99 {cls.e2e_p99_s:g} s"
    props.update(extra or {})
    return {k: str(v) for k, v in props.items()}


def env_secrets(env: Environment) -> list[str]:
    """The secret values an Environment knows of: api key, admin token, keys named by *_key_env."""
    out = [env.endpoints.api_key, env.gateway.admin_token if env.gateway else None]
    for model in (env.breaker, env.endpoints):
        for field, value in model:
            if field.endswith("_key_env") and value:
                out.append(os.environ.get(str(value)))
    return [s for s in out if s]


def _escape(text: str, key: bool = False) -> str:
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    if key:
        out = out.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ")
    return out


def write_environment_properties(
    results_dir: str | Path, env: Environment, extra: Mapping[str, Any] | None = None
) -> Path:
    """Write environment.properties (Java properties format) for the report's Environment widget."""
    for secret in env_secrets(env):
        register_secret(secret)
    props = environment_properties(env, extra)
    lines = [f"{_escape(k, key=True)}={redact(_escape(v))}" for k, v in props.items()]
    path = _results(results_dir) / "environment.properties"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
