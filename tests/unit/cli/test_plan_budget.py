"""The plan `chaos env check` prints shows each suite's scenario budget, derived from the environment,
where the suite runs."""
from __future__ import annotations

import re

from chaos.env import load
from chaos.experiment import suite_budgets as budgets
from chaos.experiment.suite_plan import RUN, SKIP, format_plan, plan

STAGING = {"STAGING_API_KEY": "k", "HF_TOKEN": "t"}


def test_the_plan_shows_each_running_suites_budget() -> None:
    env = load("staging.example", environ=STAGING)
    rows = plan(env, allow_destructive=True)
    rec = next(r for r in rows if r.suite == "recovery" and r.what.startswith("GPU driver reset"))
    assert rec.verdict == RUN and rec.budget_s == budgets.for_suite(env, "recovery").total
    skipped = next(r for r in rows if r.verdict == SKIP)
    assert skipped.budget_s is None
    lines = format_plan(rows)
    assert re.match(r"^suite +scenarios +verdict +budget +why$", lines[0]), lines[0]
    shown = budgets.shown(rec.budget_s)
    assert shown.endswith(" min") and re.search(rf"GPU driver reset.* run +{shown} *$", "\n".join(lines), re.M), lines


def test_a_slower_environment_gets_a_larger_budget() -> None:
    local, staging = load("local", environ={}), load("staging.example", environ=STAGING)
    for suite in ("recovery", "load", "network", "breaker", None):
        assert budgets.for_suite(staging, suite).total > budgets.for_suite(local, suite).total, suite
