"""Baseline records: what a load run looked like, kept as a file a team commits and compares against.

Per prompt class: TTFT, TPOT, ITL and E2E P50/P99 over ALL attempts (a failed attempt counts as an
SLO miss, so a run that fails 2 % of its attempts has no finite P99), the error rate, the goodput
share and output tokens per second; for the run: throughput, goodput and tokens per second; where a
GPU is visible, its temperature, power, energy and tokens per joule; and what it was measured on
(the environment's name and the hash of its file, the harness's and the server's versions).

    {"version": 2, "created": ..., "environment": "local", "env_hash": "sha256:...", "workload": "mix-7-2-1",
     "versions": {...}, "tolerance": {"rel": 0.2, "abs_s": 0.005},
     "classes": {"short": {"ttft": {"50": s, "99": s | null}, ..., "requests": n, "error_rate": x,
                           "goodput_share": x, "tokens_per_s": x}},
     "throughput_per_s": x, "goodput_per_s": x, "tokens_per_s": x, "gpu": {...} | {"visible": false, "why": ...}}

A P99 of null is a miss: more than 1 % of that class's attempts failed. Version 1 files (latency
only) are still read.
"""
from __future__ import annotations

import hashlib
import json
import math
import platform
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from chaos.errors import ConfigError
from chaos.load.records import RequestRecord
from chaos.load.stats import meets_slos, nearest_rank, slo_limits

WORKLOADS = ("mix-7-2-1", "burst-100x32k")
METRICS = ("ttft", "tpot", "itl", "e2e")
QUANTILES = (50, 99)
MISS = math.inf  # a failed attempt's latency: it missed every SLO


def workload_load(env: Any, workload: str) -> dict[str, Any]:
    """The load (start_env_load's overrides) of a named workload: the production mix for twice the
    profile's duration (scaled by time_scale), or 100 consecutive requests of the largest class from
    one user, run to completion within 100 x that class's E2E P99 + 30 s (an SLA, not a constant)."""
    if workload == "mix-7-2-1":
        return {"duration_s": max(1.0, env.load.duration_s * 2 * env.time_scale)}
    if workload == "burst-100x32k":
        return {"workload": "burst", "workload_n": 100, "users": 1, "duration_s": burst_deadline_s(env)}
    raise ConfigError(f"--workload {workload!r}: expected one of {', '.join(WORKLOADS)}")


def largest_class(env: Any) -> str:
    """The prompt class with the most tokens (the seed's 32k class)."""
    classes = dict(env.load.classes) or {"xl": 0}
    return str(max(classes, key=lambda c: classes[c]))


def burst_deadline_s(env: Any) -> float:
    sla = env.slas.latency.get(largest_class(env))
    return 100 * (sla.e2e_p99_s if sla else 60.0) + 30


def path_for(env: Any, workload: str) -> Path | None:
    """Where the environment keeps a workload's baseline: `baseline_file` with the workload in its name."""
    if not env.baseline_file:
        return None
    p = Path(env.baseline_file)
    return p.with_name(f"{p.stem}-{workload}{p.suffix}")


def missing(env: Any, workload: str) -> str | None:
    """Why a workload's regression check cannot run (its baseline file is not there), else None."""
    p = path_for(env, workload)
    if p is not None and p.exists():
        return None
    return f"no baseline for {workload} ({p or 'the environment has no baseline_file'})"


def with_misses(records: Sequence[RequestRecord], metric: str) -> list[float]:
    """Every attempt's `metric`, sorted, a failed attempt as a miss (inf). A successful attempt with
    no value (the TPOT of a one-token answer) is left out; ITL takes every inter-token gap."""
    out: list[float] = []
    for r in records:
        if not r.ok:
            out.append(MISS)
        elif metric == "itl":
            out.extend(r.gaps)
        elif (v := getattr(r, metric)) is not None:
            out.append(float(v))
    return sorted(out)


def class_figures(records: Sequence[RequestRecord], slos: Mapping[str, Any] | None, window_s: float) -> dict[str, Any]:
    """One class's figures (see the module docstring); latencies in seconds, None for a miss or no data."""
    finals = [r for r in records if r.final]
    failed = sum(1 for r in finals if not r.ok)  # rejected requests are failures too: the user got no answer
    good = sum(1 for r in finals if meets_slos(r, slo_limits(slos, r.prompt_class)))
    tokens = sum(r.output_tokens or 0 for r in records if r.ok)
    out: dict[str, Any] = {}
    for m in METRICS:
        values = with_misses(records, m)
        out[m] = {str(q): _finite(nearest_rank(values, q / 100)) for q in QUANTILES}
    out.update(attempts=len(records), requests=len(finals), failed_attempts=sum(1 for r in records if not r.ok),
               error_rate=failed / len(finals) if finals else None,
               goodput_share=good / len(finals) if finals else None,
               tokens_per_s=tokens / window_s if window_s > 0 else None)
    return out


def _finite(v: float | None) -> float | None:
    return None if v is None or math.isinf(v) else round(v, 6)


def figures(records: Sequence[RequestRecord], slos: Mapping[str, Any] | None) -> dict[str, Any]:
    """Per-class and whole-run figures of a load run."""
    recs = list(records)
    window_s = (max(r.t_end for r in recs) - min(r.t_send for r in recs)) if recs else 0.0
    by: dict[str, list[RequestRecord]] = {}
    for r in recs:
        by.setdefault(r.prompt_class or "unknown", []).append(r)
    finals = [r for r in recs if r.final]
    good = sum(1 for r in finals if meets_slos(r, slo_limits(slos, r.prompt_class)))
    tokens = sum(r.output_tokens or 0 for r in recs if r.ok)

    def per_s(n: int) -> float | None:
        return round(n / window_s, 4) if window_s > 0 else None

    return {"classes": {name: class_figures(by[name], slos, window_s) for name in sorted(by)},
            "window_s": round(window_s, 3), "requests": len(finals),
            "throughput_per_s": per_s(sum(1 for r in finals if r.ok)), "goodput_per_s": per_s(good),
            "tokens_per_s": per_s(tokens)}


def env_hash(env: Any) -> str:
    """sha256 of the environment file's bytes (of its model when it came from no file)."""
    src = Path(env.source)
    data = src.read_bytes() if src.is_file() else env.model_dump_json().encode()
    return "sha256:" + hashlib.sha256(data).hexdigest()[:16]


def versions(server_version: str | None = None) -> dict[str, str | None]:
    from chaos import __version__

    return {"llm-chaos": __version__, "python": platform.python_version(), "server": server_version}


def record(records: Sequence[RequestRecord], *, env: Any, workload: str, rel: float = 0.2, abs_s: float = 0.005,
           gpu: dict[str, Any] | None = None, server_version: str | None = None) -> dict[str, Any]:
    """A baseline document from a load run's records (see the module docstring)."""
    if not records:
        raise ConfigError(f"baseline for {workload}: the load run produced no records; nothing to record")
    doc: dict[str, Any] = {"version": 2, "created": time.time(), "environment": env.name, "env_hash": env_hash(env),
                           "workload": workload, "versions": versions(server_version),
                           "tolerance": {"rel": rel, "abs_s": abs_s}}
    doc.update(figures(records, env.slas.latency))
    doc["gpu"] = gpu if gpu is not None else {"visible": False, "why": "no GPU visible"}
    return doc


def write(path: str | Path, doc: Mapping[str, Any]) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    tmp.replace(p)  # whole or not at all: a baseline half written is worse than none
    return p


def read(path: str | Path) -> dict[str, Any]:
    """Load and check a baseline file; problems are one ConfigError line naming the file and field."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{p}: no baseline; record one with `chaos baseline record`")
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except ValueError as e:
        raise ConfigError(f"{p}: baseline is not JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("classes"), dict):
        raise ConfigError(f"{p}: field 'classes': expected a mapping of prompt class to figures")
    if doc.get("version", 1) not in (1, 2):
        raise ConfigError(f"{p}: field 'version': expected 1 or 2, got {doc.get('version')!r}")
    tol = doc.setdefault("tolerance", {"rel": 0.2, "abs_s": 0.005})
    for k in ("rel", "abs_s"):
        if not isinstance(tol.get(k, 0), (int, float)) or tol.get(k, 0) < 0:
            raise ConfigError(f"{p}: field 'tolerance.{k}': expected a number >= 0")
    for cls, metrics in doc["classes"].items():
        if not isinstance(metrics, dict):
            raise ConfigError(f"{p}: field 'classes.{cls}': expected a mapping")
        for m in METRICS:
            by_q = metrics.get(m)
            if by_q is not None and (not isinstance(by_q, dict) or
                                     any(v is not None and not isinstance(v, (int, float)) for v in by_q.values())):
                raise ConfigError(f"{p}: field 'classes.{cls}.{m}': expected {{\"50\": seconds, \"99\": seconds}}")
    return doc
