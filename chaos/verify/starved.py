"""A verdict on a client the host starved is not proven: its rules measured the host, not the client.

The CPU watch (chaos.shared.cpu_watch) says which runs were starved; this turns that into the verdict's
words: a `client_cpu` row, not proven, first, "the host starved the client (N s of CPU in M s; ...)",
and every FAIL among the other rows made n/a ("not judged") so that nothing reads as the client's fault.
"""
from __future__ import annotations

from collections.abc import Mapping

from chaos.shared.cpu_watch import CpuUse, starved_of
from chaos.verify.verdict import Verdict


def starved_verdict(v: Verdict, cpu: Mapping[str, CpuUse | None], *, who: str = "the client",
                    check: str = "client_cpu") -> bool:
    """Record each run's CPU use in v.data[check]; when any was starved, make v not proven. True if so."""
    v.data[check] = {name: u.as_dict() if u is not None else None for name, u in cpu.items()}
    worst = starved_of(list(cpu.values()))
    if worst is None:
        return False
    not_judged(v, who)
    runs = [name for name, u in cpu.items() if u is not None and u.starved]
    row = v.not_proven(check, f"{who} ran", f"{worst.cpu_s:.2f} s CPU, {worst.wait_s:.1f} s waiting", worst.why(who))
    row.detail = f"{worst.why(who)}; starved: {', '.join(runs)}"
    v.rows.insert(0, v.rows.pop())  # the reason first: every other row measured the host
    return True


def not_judged(v: Verdict, who: str) -> None:
    """Each FAIL of v made n/a: it measured a starved `who`'s host, not what it names."""
    for r in v.failures:
        r.ok, r.detail = None, f"not judged, {who} was starved; {r.detail}".rstrip("; ")
