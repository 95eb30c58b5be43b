"""Guided exploration: follow-ups to schedules that took the system somewhere new.

Purely random schedules rarely line two faults up with a moment that matters: a restart while a
rollback holds, a kill during a half-open probe. The explorer therefore keeps, like a coverage-guided
fuzzer, the gateway's breaker moves each schedule caused ("canary:half_open->forced_open"). The first
schedule to cause a move never seen before in this exploration becomes a parent: its follow-ups are
the parent's faults plus one more, drawn from the same menu and blast radius, starting just after the
moment of that move (while the state it entered still holds).

Determinism: the seeded schedules are drawn from the seed alone, one every other run, so two runs with
the same seed try the same seeded schedules in the same order; a follow-up is drawn from the seed, its
parent's hash and the move, so the same finding leads to the same follow-ups. The report marks each
schedule with where it came from.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from chaos.explore.schedule import Schedule, draw_fault, menu_for

FOLLOW_UPS = 3      # follow-ups per new move, at most
# which leads are followed first: the rarer the state a move entered, the more it is worth
DEPTH = {"forced_open": 3, "half_open": 2, "open": 2, "closed": 1}
AFTER_MOVE_S = (0.5, 6.0)  # a follow-up's fault starts this long after the move


@dataclass
class Lead:
    """A move first seen in `parent`, `at_s` seconds into its faults, and the follow-ups it has had."""

    parent: Schedule
    move: str
    at_s: float
    tried: int = 0


@dataclass
class Guide:
    """The moves seen so far and the leads still open: the deepest state first (a rollback before a trip
    before a recovery), the newest first among equals."""

    env: Any
    seed: int
    allow_destructive: bool
    seen: set[str] = field(default_factory=set)
    leads: list[Lead] = field(default_factory=list)

    def learn(self, schedule: Schedule, moves: list[tuple[str, float]]) -> list[str]:
        """Record the moves one schedule caused ((move, seconds into its faults)); returns the new ones."""
        new = []
        for move, at in moves:
            if move in self.seen:
                continue
            self.seen.add(move)
            new.append(move)
            if at + AFTER_MOVE_S[0] < schedule.horizon_s:
                self.leads.insert(0, Lead(schedule, move, at))
        self.leads.sort(key=lambda lead: -DEPTH.get(lead.move.rsplit("->", 1)[-1], 0))  # stable: newest first
        return new

    def follow_up(self) -> tuple[Schedule, str] | None:
        """The next follow-up (and why it was drawn), or None when every lead is spent."""
        while self.leads:
            lead = self.leads[0]
            if lead.tried >= FOLLOW_UPS:
                self.leads.pop(0)
                continue
            lead.tried += 1
            rng = random.Random(f"{self.seed}:{lead.parent.key()}:{lead.move}:{lead.tried}")
            h = lead.parent.horizon_s
            start = (lead.at_s + AFTER_MOVE_S[0], min(lead.at_s + AFTER_MOVE_S[1], h - 0.5))
            extra = draw_fault(self.env, rng, menu_for(self.env, self.allow_destructive), start=start, horizon_s=h,
                               chosen=list(lead.parent.faults))
            if extra is None:
                continue
            faults = sorted([*lead.parent.faults, extra], key=lambda f: f.start_s)
            child = lead.parent.model_copy(update={"faults": faults, "breaks": None})
            return child, f"follow-up {lead.tried} of {lead.parent.key()} after {lead.move} at +{lead.at_s:.1f}s"
        return None


def moves_of(transitions: list[dict[str, Any]], t0: float) -> list[tuple[str, float]]:
    """The gateway's own transitions as ("pool:src->dst", seconds after t0), in order (an operator's
    reset is the explorer's doing, not the system's)."""
    return [(f"{t.get('name')}:{t.get('src')}->{t.get('dst')}", float(t["t"]) - t0) for t in transitions
            if not str(t.get("reason", "")).startswith("operator")]
