"""Shared helpers for the suites: scenario verdict staging and the standard evidence attachments."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from chaos.observe.gateway import env_admin_call
from chaos.report import allure as rep
from chaos.report.tables import verdict_table
from chaos.verify.verdict import Verdict


def requires(env: Any, *needs: Callable[[Any], str | None]) -> None:
    """Skip with the first unmet requirement's reason: the same questions `chaos env check` asks
    (chaos.experiment.suite_plan), so its table and the run agree."""
    import pytest

    for need in needs:
        if (why := need(env)) is not None:
            pytest.skip(why)


def judge(stage: str, verdicts: Iterable[Verdict]) -> None:
    """One report step per verdict stage; attaches each table, then asserts them all.

    Stage 1 ("the fault really happened") and stage 2 ("the system behaved") are separate steps,
    so a reader sees which half failed.
    """
    vs = list(verdicts)
    with rep.phase(f"verify: {stage}"):
        for v in vs:
            rep.attach_table(verdict_table(v.rows, title=v.name), name=v.name)
        for v in vs:
            v.assert_ok()


def fault_happened(evidence: dict[str, Any], **expect: Any) -> Verdict:
    """Stage 1 verdict from the fault's own proof of effect (FaultNotEffective already raised if absent)."""
    if not expect:  # a stage 1 with nothing to check could never fail
        raise ValueError("fault_happened needs at least one expectation about the fault's evidence")
    v = Verdict("fault took effect")
    for key, want in expect.items():
        got = evidence.get(key)
        if isinstance(got, str) and got.startswith("inconclusive"):  # the check could not run: never a pass
            v.not_proven(key, getattr(want, "__doc__", None) or want, got, f"stage 1 could not check it: {got}")
            continue
        ok = want(got) if callable(want) else got == want
        v.add(key, getattr(want, "__doc__", None) or want, got, bool(ok))
    return v


def fault_proof(fault: Any, *, together: bool = False) -> Verdict:
    """Stage 1 from each part of a (possibly combined) fault: a proxy rule must have hit requests.

    together=True: the same rule on every replica, where the gateway decides which replicas get
    traffic, so the rules must have hit requests between them (each one is still listed)."""
    v = Verdict("fault took effect")
    parts = getattr(fault, "faults", None) or [fault]
    if together:
        hits = sum(int(getattr(f, "evidence", {}).get("hits", 0)) for f in parts)
        v.add("hits, all proxies", ">= 1", hits, hits >= 1,
              ", ".join(f"{f.evidence.get('proxy')}: {f.evidence.get('hits', 0)}" for f in parts))
        return v
    for f in parts:
        ev = dict(getattr(f, "evidence", {}) or {})
        where = ev.get("proxy") or f.params().get("admin_url") or ""
        if "hits" in ev:
            v.add(f"{f.kind} hits @ {where}", ">= 1", ev["hits"], ev["hits"] >= 1,
                  f"rule {ev.get('rule')}: {ev['hits']} hit of {ev.get('matched', 0)} matched, {ev.get('seen', 0)} seen")
        else:
            v.add(f"{f.kind} @ {where}".strip(" @"), "verified", "verified" if f.record_id else None,
                  f.record_id is not None, ", ".join(f"{k}={ev[k]}" for k in list(ev)[:4]))
    return v


def client_commands(env: Any, examples: Path) -> dict[str, str]:
    """The environment's `client_commands`, else llm-chaos's reference client (examples/clients) as one."""
    import shlex
    import sys

    return dict(env.client_commands) or {
        "reference (python, subprocess)": f"{shlex.quote(sys.executable)} {examples / 'reference_client.py'} "
                                          f"{{base_url}} --env {shlex.quote(env.source)} --timeout 5"}


def gateway_admin(stack: Any, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call the gateway's admin API (Bearer token from the environment); returns its JSON."""
    return env_admin_call(stack.env, method, path, body or {})


def wait_out_left_over_alerts(run: Any, monitoring: Any, fault: str | None) -> None:
    """Before a scenario's load: an alert its fault must fire that still fires from an earlier fault (a freeze
    whose restart pages with no expectation of its own, then a restart that expects the same page) is waited
    out, as a phase of its own, so this fault's firing can be told apart (chaos.verify.alert_watch.wait_out)."""
    if held := monitoring.held(fault):
        with run.phase(f"wait out {', '.join(held)}: still firing from an earlier fault"):
            monitoring.wait_out(fault)
