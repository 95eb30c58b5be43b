"""The release checklist: each item of the seed's acceptance checklist is proven, failed or not
proven (with why), by the scenarios that carry `@pytest.mark.proves("item-id")`.

A scenario proves its items only when its test passed and none of the rows it judged was "not
proven" (Verdict.not_proven); a failed test fails them; a skip, refusal, INCONCLUSIVE or xfail
leaves them not proven with its reason. A scenario may prove one `part` of an item (the breaker's
degrade tier: no trip below the threshold, degrade above it): the item is proven when every part
named by a collected scenario is proven by at least one of them, and failed when any scenario failed.
An item no collected scenario covers is "not proven: no scenario ran it". Pure logic: the pytest
plugin (chaos.fixtures.checklist) feeds it test outcomes and the verdicts each test asserted.

`monitoring-alerts` is proven only by the alert verdicts (chaos.verify.alerts): every scenario that
judged alerts must have read Prometheus and seen each alert its fault expects fire and resolve. A
scenario that expected no alert of its fault, or never reached its alerts (skipped), judges none: it
neither proves nor disproves the item; when no scenario judged any, the item is not proven.
`answers-stable` likewise, by the answers verdicts alone (chaos.verify.answers): every scenario that
judged its answers across its fault must have had the power to see them change and seen none change.
"""
from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.errors import ConfigError
from chaos.verify.alerts import ALERTS_JUDGED, MONITORING_ITEM
from chaos.verify.answers import ANSWERS_ITEM, ANSWERS_JUDGED
from chaos.verify.verdict import Verdict

PROVEN, FAILED, NOT_PROVEN = "proven", "failed", "not proven"
NOT_JUDGED = "not judged"  # a scenario's answer only: it covers the item but judged nothing of it
NO_SCENARIO = "no scenario ran it"


@dataclass(frozen=True)
class Item:
    """One line of the release checklist: a stable id (what `proves` names) and what it claims."""

    id: str
    text: str
    every: bool = False  # proven only when every scenario that judged it proved it (each fault its own part)


# the seed's checklist (shared/reference/seed-requirements.md), in its order
SEED_CHECKLIST: tuple[Item, ...] = (
    Item("gpu-driver-reset", "GPU driver crash and recovery (container restart)"),
    Item("nccl-timeout", "NCCL communication timeout"),
    Item("cold-start", "cold start: a new replica from start to serving"),
    Item("network-jitter", "clients under 300 ms - 5 s network jitter"),
    Item("retry-interval-500ms", "minimum retry interval >= 500 ms"),
    Item("exponential-backoff", "exponential backoff"),
    Item("breaker-degrade", "breaker primary tier: degrade at error rate >= 1 % or latency >= 2 s"),
    Item("breaker-rollback", "breaker advanced tier: forced rollback at error rate >= 3 %"),
    Item("oom-burst", "anomaly rule: 3 OOMs within 10 s trip the breaker"),
    Item("leak-trend", "anomaly rule: memory growth > 5 % per hour"),
    Item("no-store", "Cache-Control: no-store on every response"),
    Item("hmac-signing", "HMAC-SHA256 request signing enforced"),
    Item("emoji-nfkc", "emoji-dense text and Unicode normalization never take a replica down"),
    Item("mix-7-2-1", "mixed 512 / 8k / 32k prompts in a 7:2:1 ratio"),
    Item("burst-100x32k", "100 consecutive 32k-token requests"),
    Item("xl-failure-rate", "the 32k requests' own failure rate"),
    Item("degraded-floor", "a performance floor for degraded mode"),
    Item("baseline-gpu", "a baseline record with GPU temperature and power"),
    Item("prefix-reuse", "prefix reuse: hit rate, memory saved, latency change"),
    Item("gray-release", "gray release stages (shadow traffic compared first)"),
)
# beyond the seed: what serving teams hit and no tool checked from outside
PROGRESS = Item("progress-truth", "a replica that says healthy while it decodes nothing is restarted, or stops saying "
                "healthy, within slas.health_truth_s")
CANCEL = Item("cancel-frees-compute", "clients that hang up mid-stream free the engine within slas.cancel_s: every "
              "hop lets their requests go")
DETECTION = Item("detection-signals", "each signal's seconds to detect each recovery fault beside its false alarms over "
                 "slow-but-healthy work, and the engine's execute-model timeout would not kill that work")
MONITORING = Item(MONITORING_ITEM, "the team's alerts fired for each fault and resolved after it", every=True)
ANSWERS = Item(ANSWERS_ITEM, "answers stay right across every fault: greedy, seeded answers unchanged from the "
               "steady state's", every=True)
# the built-in checklist: the seed's items, the monitoring item of every scenario that judges alerts and the
# answers item of every scenario that judges its answers across its fault
CHECKLIST: tuple[Item, ...] = (*SEED_CHECKLIST, PROGRESS, CANCEL, DETECTION, MONITORING, ANSWERS)
# the items proven by one kind of verdict alone (the data key its verdicts carry), not by the test's outcome
VERDICT_ITEMS = {MONITORING_ITEM: ALERTS_JUDGED, ANSWERS_ITEM: ANSWERS_JUDGED}


def parse_items(lines: Iterable[str], base: Sequence[Item] = CHECKLIST) -> tuple[Item, ...]:
    """The checklist: `base` plus a team's own items, one 'id: what it proves' a line (ini chaos_checklist)."""
    out = list(base)
    for line in (l.strip() for l in lines):
        if not line:
            continue
        ident, sep, text = line.partition(":")
        if not sep or not ident.strip() or " " in ident.strip():
            raise ConfigError(f"ini chaos_checklist: {line!r}: expected 'item-id: what it proves'")
        out.append(Item(ident.strip(), text.strip()))
    return tuple(out)


@dataclass
class ScenarioResult:
    """One collected test that proves checklist items: how it ended and what it judged."""

    name: str
    items: dict[str, str]                     # item id -> part ("" = the whole item)
    status: str = NOT_PROVEN
    reason: str = "did not run"
    verdicts: list[Verdict] = field(default_factory=list)

    def record(self, when: str, outcome: str, reason: str = "", xfail: bool = False) -> None:
        """One phase's report (setup, call, teardown): the worst phase decides."""
        if self.status == FAILED:
            return
        if outcome == "failed":
            self.status, self.reason = FAILED, reason or f"{when} failed"
        elif xfail:
            self.status, self.reason = NOT_PROVEN, f"xfail: {reason}" if reason else "xfail"
        elif outcome == "skipped":
            self.status, self.reason = NOT_PROVEN, reason or "skipped"
        elif when == "call":
            self.status, self.reason = PROVEN, ""

    def status_for(self, item: str) -> tuple[str, str]:
        """This scenario's answer for one of its items: a passed test with a "not proven" row is not proven."""
        if item == MONITORING_ITEM:
            return self._alerts_status()
        if item == ANSWERS_ITEM:
            return self._answers_status()
        if self.status != PROVEN:
            return self.status, self.reason
        rows = [r for v in self.verdicts for r in v.unproven if not r.items or item in r.items]
        if rows:
            return NOT_PROVEN, "; ".join(f"{r.check}: {r.unproven}" for r in rows)
        return PROVEN, ""

    def _alerts_status(self) -> tuple[str, str]:
        """The monitoring item from this scenario's alert verdicts alone: failed where one failed, not
        judged where none was asserted or none expected an alert, not proven where a row was not."""
        alerts = [v for v in self.verdicts if v.data.get(ALERTS_JUDGED) is not None]
        bad = [r for v in alerts for r in v.failures]
        if bad:
            return FAILED, "; ".join(f"{r.check}: {r.detail or r.measured}" for r in bad)
        if self.status == FAILED:
            return NOT_PROVEN, f"the scenario failed ({self.reason}); its alerts were not what failed"
        if not alerts:
            return NOT_JUDGED, f"judged no alerts ({self.reason or 'none asserted'})"
        if self.status != PROVEN:  # skipped or xfailed after its alerts were judged: no proof either way
            return NOT_PROVEN, self.reason
        rows = [r for v in alerts for r in v.unproven]
        if rows:
            return NOT_PROVEN, "; ".join(f"{r.check}: {r.unproven}" for r in rows)
        if not any(v.data[ALERTS_JUDGED] for v in alerts):
            return NOT_JUDGED, "; ".join(f"{v.name}: monitoring.expect names no alert for it" for v in alerts)
        return PROVEN, ""

    def _answers_status(self) -> tuple[str, str]:
        """The answers item from this scenario's answers verdicts alone: failed where one named changed
        answers, not judged where the scenario judged none, not proven where it could not tell."""
        judged = [v for v in self.verdicts if v.data.get(ANSWERS_JUDGED)]
        bad = [r for v in judged for r in v.failures]
        if bad:
            return FAILED, "; ".join(f"{r.check}: {r.detail or r.measured}" for r in bad)
        if not judged:
            return NOT_JUDGED, f"judged no answers ({self.reason or 'none asserted'})"
        if self.status == FAILED:
            return NOT_PROVEN, f"the scenario failed ({self.reason}); its answers were not what failed"
        if self.status != PROVEN:
            return NOT_PROVEN, self.reason
        rows = [r for v in judged for r in v.unproven]
        if rows:
            return NOT_PROVEN, "; ".join(f"{r.check}: {r.unproven}" for r in rows)
        return PROVEN, ""

    def evidence(self, item: str = "") -> str:
        """Where the proof came from: the verdicts it judged (for the monitoring item its alert verdicts),
        each with its `source` where it names one."""
        seen: list[str] = []
        for v in self.verdicts:
            if item in VERDICT_ITEMS and v.data.get(VERDICT_ITEMS[item]) is None:
                continue
            text = v.name + (f" [{v.data['source']}]" if v.data.get("source") else "")
            if text not in seen:
                seen.append(text)
        return ", ".join(seen)


@dataclass
class ItemStatus:
    """An item's answer: its status, the scenarios behind it, why (when not proven) and the evidence."""

    item: Item
    status: str
    scenarios: list[str] = field(default_factory=list)
    why: str = ""
    evidence: str = ""
    expected: str = ""  # why the environment expects it not proven (its expect_not_proven), if it does

    @property
    def covered(self) -> bool:
        """Whether a collected scenario covers it (else "no scenario ran it")."""
        return bool(self.scenarios)


def judge(items: Sequence[Item], results: Iterable[ScenarioResult]) -> list[ItemStatus]:
    """Each item's status from the scenarios that cover it (see the module docstring for the rule)."""
    results = list(results)
    out = []
    for item in items:
        covering = [(r, r.items[item.id]) for r in results if item.id in r.items]
        if not covering:
            out.append(ItemStatus(item, NOT_PROVEN, why=NO_SCENARIO))
            continue
        every = [(r, part, *r.status_for(item.id)) for r, part in covering]
        answers = [a for a in every if a[2] != NOT_JUDGED]
        if not answers:
            out.append(ItemStatus(item, NOT_PROVEN, [r.name for r, _ in covering],
                                  "no scenario judged it: " + "; ".join(_grouped([(r.name, w) for r, _, _, w in every]))))
            continue
        # an item proven by every scenario: each is a part of its own
        answers = [(r, r.name if item.every else part, st, w) for r, part, st, w in answers]
        covering = [(r, part) for r, part, _, _ in answers]
        failed = [(r, why) for r, _, st, why in answers if st == FAILED]
        if failed:
            out.append(ItemStatus(item, FAILED, [r.name for r, _ in failed], "; ".join(f"{r.name}: {w}" for r, w in failed),
                                  ", ".join(r.evidence(item.id) for r, _ in failed if r.evidence(item.id))))
            continue
        parts = list(dict.fromkeys(part for _, part in covering))
        proving = [r for r, _, st, _ in answers if st == PROVEN]
        missing = [p for p in parts if not any(st == PROVEN for _, part, st, _ in answers if part == p)]
        if missing:
            named = [(r.name + (f" ({part})" if part and not item.every else ""), w)
                     for r, part, st, w in answers if part in missing]
            why = "; ".join(_grouped(named) if item.every else [f"{n}: {w}" for n, w in named])
            out.append(ItemStatus(item, NOT_PROVEN, [r.name for r, part in covering if part in missing], why))
        else:
            out.append(ItemStatus(item, PROVEN, [r.name for r in proving], "",
                                  "; ".join(dict.fromkeys(r.evidence(item.id) for r in proving if r.evidence(item.id)))))
    return out


def _grouped(answers: Sequence[tuple[str, str]]) -> list[str]:
    """'scenario: why' lines, one per distinct why ("a and 6 more: no prometheus to read")."""
    names: dict[str, list[str]] = {}
    for name, why in answers:
        names.setdefault(why, []).append(name)
    return [f"{n[0]}" + (f" and {len(n) - 1} more" if len(n) > 1 else "") + f": {why}" for why, n in names.items()]


def render(statuses: Sequence[ItemStatus]) -> list[str]:
    """The table as terminal lines: item, status, then the proving scenario(s) and their evidence, or
    which scenario failed or could not prove it and why."""
    rows = [(s.item.id, status_text(s).upper() if s.status != PROVEN else status_text(s), _why(s)) for s in statuses]
    w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(("item", "status"))]
    out = [f"{'item':<{w[0]}}  {'status':<{w[1]}}  proved by (evidence) / why not"]
    out += [f"{a:<{w[0]}}  {b:<{w[1]}}  {c}" for a, b, c in rows]
    counts = {st: sum(1 for s in statuses if s.status == st) for st in (PROVEN, FAILED, NOT_PROVEN)}
    excused = sum(1 for s in statuses if s.status == NOT_PROVEN and s.expected)
    out.append(", ".join(f"{n} {st}" for st, n in counts.items()) + (f" ({excused} expected)" if excused else "")
               + f" of {len(statuses)} items")
    return out


def status_text(s: ItemStatus) -> str:
    """The status as shown: "not proven (expected)" where the environment's expect_not_proven lists it."""
    return f"{s.status} (expected)" if s.expected and s.status == NOT_PROVEN else s.status


def _why(s: ItemStatus) -> str:
    if s.status == PROVEN:
        told = " [on expect_not_proven, yet proven: drop it from the list]" if s.expected else ""
        return f"{', '.join(s.scenarios)} (evidence: {s.evidence or '-'}){told}"
    return f"{s.why} [expected: {s.expected}]" if s.expected and s.status == NOT_PROVEN else s.why


def unproven_lines(statuses: Sequence[ItemStatus]) -> list[str]:
    """What --require-proven prints: every item not proven (failed ones fail the run anyway) and why."""
    return [f"{s.item.id}: {s.why}" for s in statuses if s.status == NOT_PROVEN]


def write_allure_result(results_dir: str | Path, statuses: Sequence[ItemStatus], notes: Sequence[str] = ()) -> Path:
    """The checklist as the report's first entry: a result named "Release checklist" whose status is
    passed only when every item is proven, with the table attached as HTML (and `notes`, e.g. the
    environment's expect_not_proven list, under the table in its description)."""
    from chaos.report.tables import Table

    d = Path(results_dir)
    d.mkdir(parents=True, exist_ok=True)
    t = Table("Release checklist", ["item", "claim", "status", "scenario", "evidence / why"])
    for s in statuses:
        t.add(s.item.id, s.item.text, status_text(s), ", ".join(s.scenarios) or "-",
              s.evidence if s.status == PROVEN else _why(s),
              status={PROVEN: "pass", FAILED: "fail"}.get(s.status))
    att = f"{uuid.uuid4()}-attachment.html"
    (d / att).write_text(t.to_html(), encoding="utf-8")
    bad = [s for s in statuses if s.status != PROVEN]
    status = "failed" if any(s.status == FAILED for s in bad) else "skipped" if bad else "passed"
    result: dict[str, Any] = {
        "uuid": str(uuid.uuid4()), "historyId": "llm-chaos-release-checklist", "name": "Release checklist",
        "fullName": "llm-chaos.release-checklist", "status": status,
        "start": int(time.time() * 1000), "stop": int(time.time() * 1000),
        "statusDetails": {"message": "\n".join(f"{s.item.id}: {status_text(s)}: {_why(s)}" for s in bad)} if bad else {},
        "description": "\n".join([*render(statuses), *notes]),
        "labels": [{"name": "parentSuite", "value": "0 release checklist"}, {"name": "suite", "value": "checklist"},
                   {"name": "epic", "value": "Release checklist"}],
        "attachments": [{"name": "release checklist", "source": att, "type": "text/html"}],
    }
    path = d / f"{result['uuid']}-result.json"
    path.write_text(json.dumps(result), encoding="utf-8")
    return path
