"""One family of checks over a window of request records, in tenacity's style:

    p99_below_s(2.0) & error_share_below(0.01) & goodput_share_above(0.9, e2e_s=2.0)

Each check measures one value over the requests that ended in a window and one judge
(`within_tolerance`) compares it with its limit, inclusive. Units are in the names: `_s` seconds,
`_share_` a share 0..1, `_per_s_` per second. A failed request counts against every check: as an
error, as a request outside the objectives, as +inf in a latency percentile.

Two consumers judge "too few requests" (a Reading with `ok` None) by their own policy: an
experiment's steady-state hypothesis (`check.check(records, window)`) fails it, no traffic being no
evidence of health; `evaluate(check, records)` makes it an n/a row of a Verdict.
"""
from chaos.checks.base import (
    MIN_REQUESTS,
    AnyOf,
    Bound,
    Check,
    Hypothesis,
    Reading,
    ended_in,
    within_tolerance,
)
from chaos.checks.evaluate import evaluate
from chaos.checks.failures import error_share_below
from chaos.checks.goodput import goodput_per_s_above, goodput_share_above
from chaos.checks.latency import p50_below_s, p99_below_s, percentile_below_s
from chaos.checks.live import live

__all__ = [
    "MIN_REQUESTS", "AnyOf", "Bound", "Check", "Hypothesis", "Reading", "ended_in", "error_share_below", "evaluate",
    "goodput_per_s_above", "goodput_share_above", "live", "p50_below_s", "p99_below_s", "percentile_below_s",
    "within_tolerance",
]
