"""Did the team's monitoring see the fault: each expected alert's time to fire, to page (the webhook
receiver), to resolve and to the resolved page; alerts that fired unexpected; and blind spots, the
alerts expected that never fired ("blind spot: no alert for <fault>").

A fault that did not happen (stage 1 failed) never counts as a missed alert: its rows are "not
proven". Without a Prometheus to read (none configured, not installed, not answering) every row is
"not proven", never green.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chaos.verify.verdict import Verdict

if TYPE_CHECKING:
    from chaos.env.monitoring import AlertExpectation
    from chaos.observe.alerts import Firing, WebhookReceiver

MONITORING_ITEM = "monitoring-alerts"  # the checklist item these verdicts alone prove (chaos.report.checklist)
# the verdict's data key saying whether it judged any alert: a fault's expected alerts, or the baseline's
# silence, read from Prometheus (False: nothing expected of the fault, or nothing read)
ALERTS_JUDGED = "alerts_judged"


@dataclass
class AlertWindow:
    """The scenario's times: its start, the fault taking effect, recovery, and the end of watching."""

    start: float
    effect_at: float
    recovered_at: float
    until: float


def alert_verdict(firings: Iterable[Firing] | None, receiver: WebhookReceiver | None, w: AlertWindow, *,
                  fault: str | None, expect: AlertExpectation | None, fault_proven: bool = True,
                  baseline_silent: bool = True, why_not: str = "") -> Verdict:
    """The monitoring rows of one scenario (fault None: the no-fault baseline)."""
    v = Verdict(f"monitoring: {fault or 'no-fault baseline'}", window=(w.start, w.until))
    v.data[ALERTS_JUDGED] = firings is not None and (fault is None or bool(expect and expect.fire))
    if firings is None:
        v.not_proven("alerts read from prometheus", "prometheus answers", None,
                     why_not or "no prometheus to read", items=(MONITORING_ITEM,))
        return v
    seen = [f for f in firings if f.end is None or f.end > w.start]
    for f in seen:
        if f.start < w.start:  # a page left over from before: neither this fault's nor a false one
            v.add(f"already firing: {f.alertname}", "-", f"since {w.start - f.start:.1f} s before the scenario",
                  None, "not counted")
    ours = [f for f in seen if f.start >= w.start]
    expected = list(expect.fire) if fault and expect else []
    allowed = set(expected) | set(expect.allow if expect else [])
    for name in expected:
        assert expect is not None and fault is not None
        # an alert left firing by an earlier scenario through this fault hides a new firing of the same
        # alert (ALERTS keeps one series per label set): neither a blind spot nor a catch
        held = [f for f in seen if f.alertname == name and f.start < w.start and (f.end is None or f.end > w.effect_at)]
        _expected_rows(v, name, [f for f in ours if f.alertname == name], receiver, w, fault, expect, fault_proven,
                       held[0] if held else None)
    for f in ours:
        if f.alertname in allowed:
            continue
        if fault is not None and expect is None:  # the team said nothing of this fault: shown, not judged
            v.add(f"alert fired: {f.alertname}", "-", f"fired {f.start - w.effect_at:.1f} s after the fault", None,
                  f"monitoring.expect names no alerts for {fault}")
        elif fault is None:
            check, ok = f"alert fired in the no-fault baseline: {f.alertname}", (False if baseline_silent else None)
            v.add(check, "no alert", f"fired {f.start - w.start:.1f} s into the baseline", ok, "a false page")
        else:
            v.add(f"unexpected alert: {f.alertname}", f"only {', '.join(sorted(allowed)) or 'none'}",
                  f"fired {f.start - w.effect_at:.1f} s after the fault", False,
                  "not expected of this fault: a false page, or name it in monitoring.expect (allow)")
    if fault is None and not ours:
        v.add("no alert in the no-fault baseline", "no alert", "none fired", True)
    return v


def _expected_rows(v: Verdict, name: str, mine: list[Firing], receiver: WebhookReceiver | None, w: AlertWindow,
                   fault: str, expect: AlertExpectation, proven: bool, held: Firing | None = None) -> None:
    n, m = expect.fire_within_s, expect.clear_within_s
    if not proven:
        v.not_proven(f"{name}: time to fire", n, None, f"the fault {fault} was not proven (stage 1): a missed alert "
                     "is not counted", items=(MONITORING_ITEM,))
        return
    if not mine and held is not None:
        v.not_proven(f"{name}: time to fire", n, None, f"{name} was already firing {w.start - held.start:.0f} s before "
                     f"the scenario (left over from an earlier fault) and still fired when {fault} took effect: a new "
                     "firing cannot be told apart from it", items=(MONITORING_ITEM,))
        return
    if not mine:
        v.add(f"blind spot: no alert for {fault}", f"{name} fires within {n:g} s", "never fired", False,
              f"blind spot: no alert for {fault}: {name} never fired over {w.until - w.effect_at:.0f} s")
        return
    f = mine[0]
    fire_s = max(0.0, f.start - w.effect_at)
    v.add(f"{name}: time to fire", n, round(fire_s, 1), fire_s <= n, "fault took effect -> ALERTS firing")
    if receiver is None:
        v.not_proven(f"{name}: time to page", n, None, "no alertmanager routes to the harness's webhook receiver",
                     items=(MONITORING_ITEM,))
    else:
        paged = receiver.first(name, "firing", w.start)
        v.add(f"{name}: time to page", n, None if paged is None else round(paged - w.effect_at, 1),
              paged is not None and paged - w.effect_at <= n,
              "fault took effect -> webhook received" if paged is not None else "never reached the webhook receiver")
    if f.end is None:
        v.add(f"{name}: time to resolve", m, "still firing", False,
              f"still firing {w.until - w.recovered_at:.0f} s after recovery")
        return
    clear_s = max(0.0, f.end - w.recovered_at)
    v.add(f"{name}: time to resolve", m, round(clear_s, 1), clear_s <= m, "recovered -> ALERTS no longer firing")
    if receiver is not None:
        done = receiver.first(name, "resolved", f.start)
        v.add(f"{name}: time to resolved page", m, None if done is None else round(max(0.0, done - w.recovered_at), 1),
              done is not None and done - w.recovered_at <= m,
              "recovered -> resolved webhook" if done is not None else "no resolved notification arrived")
