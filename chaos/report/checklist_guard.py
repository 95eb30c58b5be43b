"""`--require-proven` against the environment's `expect_not_proven:` list: which items fail the run.

An environment with no list keeps the strict rule: every item not proven fails the run, whether a
collected scenario covers it or not. An environment with a list (even an empty one) is judged on the
items its collected scenarios cover, so a lane running some suites passes on what it ran: a covered item
not proven fails the run unless the list names it; an item on the list that was proven is reported
(drop it from the list), never failed, since proving more is no regression. A failed item fails the
run through its failed test, listed or not.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chaos.errors import ConfigError
from chaos.report.checklist import NOT_PROVEN, PROVEN, Item, ItemStatus, unproven_lines


def expected_not_proven(env: Any, items: Sequence[Item]) -> dict[str, str] | None:
    """The environment's expect_not_proven list (None: it declares none); an id no checklist item has is
    one ConfigError naming the file and the field."""
    listed: Mapping[str, str] | None = getattr(env, "expect_not_proven", None)
    if listed is None:
        return None
    known = {i.id for i in items}
    for ident in listed:
        if ident not in known:
            source = getattr(env, "source", None) or getattr(env, "name", "environment")
            raise ConfigError(f"{source}: expect_not_proven.{ident}: unknown checklist item (known: "
                              f"{', '.join(sorted(known))}; a team's own items come from the ini option chaos_checklist)")
    return dict(listed)


def mark_expected(statuses: Sequence[ItemStatus], expected: Mapping[str, str] | None) -> None:
    """Give each listed item its reason, so the table and the report show it as expected."""
    for s in statuses:
        s.expected = (expected or {}).get(s.item.id, "")


@dataclass
class Guard:
    """What --require-proven makes of a run: the items that fail it (each 'id: why'), and the listed
    items that were proven after all (reported only)."""

    failing: list[str] = field(default_factory=list)
    proven_anyway: list[str] = field(default_factory=list)


def guard(statuses: Sequence[ItemStatus], expected: Mapping[str, str] | None) -> Guard:
    """The verdict of --require-proven on `statuses` (see the module docstring)."""
    if expected is None:
        return Guard(unproven_lines(statuses))
    failing = [f"{s.item.id}: {s.why}" for s in statuses
               if s.status == NOT_PROVEN and s.covered and s.item.id not in expected]
    anyway = [f"expected not proven but proven: {s.item.id} - drop it from expect_not_proven"
              for s in statuses if s.status == PROVEN and s.item.id in expected]
    return Guard(failing, anyway)


def expected_lines(env_name: str, expected: Mapping[str, str] | None) -> list[str]:
    """The environment's list as printed under the checklist (nothing when it declares none)."""
    if expected is None:
        return []
    head = f"expect_not_proven (environment {env_name}): " + ("none" if not expected else f"{len(expected)} item(s)")
    return [head, *(f"  {ident}: {why}" for ident, why in expected.items())]
