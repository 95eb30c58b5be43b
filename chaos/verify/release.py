"""Gray-release gates: each stage is judged from the users' records and the gateway's shadow pairs.

- `shadow_gate`: a shadow stage (the canary gets copies, users get stable's answers). No answer a
  user got came from the canary; the users' error rate and e2e P99 during the stage match the same
  load just before it (no mirror) within the stated tolerance; on the mirrored pairs the canary's
  error rate and P99 per prompt class match stable's, and the response diff score (below) stays
  under the team's 0.01.
- `live_gate`: a stage that lets the canary answer users. Only requests whose attributes the stage
  admits reached the canary (the tiers not yet admitted never did), the canary answered enough of
  them to judge, and its error rate and P99 per class match stable's over the same stage.
Diff score: for each pair both answered (200), 1 - difflib's ratio of the two answers' words
(0 = identical, 1 = nothing in common); the score is the mean over the pairs. Decoding must be
deterministic (temperature 0) for a nonzero score to mean a different model, not sampling.
"""
from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chaos.load.records import RequestRecord
from chaos.load.stats import nearest_rank
from chaos.verify.breaker import default_pool_of
from chaos.verify.verdict import Verdict


@dataclass(frozen=True)
class Tolerance:
    """How far the canary (or the users under shadow traffic) may be from the baseline."""

    max_diff_score: float = 0.01       # the team's gate: diff-score < 0.01
    max_error_rate_delta: float = 0.01  # canary error rate <= baseline's + this
    max_p99_ratio: float = 1.5         # canary e2e P99 <= baseline's x this + the slack (per prompt class)
    p99_slack_s: float = 0.25          # so that 0.09 s vs 0.15 s of a loaded gateway's loop is not a regression
    min_pairs: int = 50                # fewer shadow pairs (or canary answers) judge nothing
    min_class_samples: int = 20        # a class with fewer on either side is shown, not judged


def diff_score(a: str, b: str) -> float:
    """1 - the similarity of two answers' word sequences (0 identical, 1 nothing in common)."""
    if a == b:
        return 0.0
    return 1.0 - difflib.SequenceMatcher(None, a.split(), b.split(), autojunk=False).ratio()


def _error_rate(oks: Sequence[bool]) -> float | None:
    return None if not oks else sum(1 for ok in oks if not ok) / len(oks)


def _p99(values: Iterable[float]) -> float | None:
    vals = sorted(values)
    return nearest_rank(vals, 0.99) if vals else None


def _compare(v: Verdict, what: str, base: list[tuple[str, bool, float | None]],
             cand: list[tuple[str, bool, float | None]], tol: Tolerance) -> None:
    """Rows: candidate vs baseline error rate, and e2e P99 per class; items are (class, ok, e2e)."""
    be, ce = _error_rate([ok for _, ok, _ in base]), _error_rate([ok for _, ok, _ in cand])
    if be is None or ce is None:
        v.add(f"{what} error rate", f"<= baseline + {tol.max_error_rate_delta:.1%}", "no answers", False,
              "nothing to compare")
    else:
        v.add(f"{what} error rate", f"<= {be + tol.max_error_rate_delta:.2%}", f"{ce:.2%}",
              ce <= be + tol.max_error_rate_delta, f"baseline {be:.2%} over {len(base)}, {len(cand)} compared")
    by_class: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for side, items in ((0, base), (1, cand)):
        for cls, ok, e2e in items:
            if ok and e2e is not None:
                by_class[cls or "-"][side].append(e2e)
    for cls, (b, c) in sorted(by_class.items()):
        bp, cp = _p99(b), _p99(c)
        enough = len(b) >= tol.min_class_samples and len(c) >= tol.min_class_samples
        if bp is None or cp is None or not enough:
            v.add(f"{what} P99 [{cls}]", f"<= {tol.max_p99_ratio:g} x baseline + {tol.p99_slack_s:g} s",
                  "-" if cp is None else f"{cp:.3f} s",
                  None, f"{len(c)} vs {len(b)} answers: fewer than {tol.min_class_samples} on a side, not judged")
            continue
        limit = bp * tol.max_p99_ratio + tol.p99_slack_s
        v.add(f"{what} P99 [{cls}]", f"<= {limit:.3f} s", f"{cp:.3f} s", cp <= limit,
              f"baseline {bp:.3f} s x {tol.max_p99_ratio:g} + {tol.p99_slack_s:g} s; {len(c)} vs {len(b)} answers")


def _items(records: Iterable[RequestRecord]) -> list[tuple[str, bool, float | None]]:
    return [(r.prompt_class or "-", r.ok, r.e2e) for r in records]


def _final_in(records: Iterable[RequestRecord], window: tuple[float, float]) -> list[RequestRecord]:
    """The final records routed inside `window`: sent in it and answered before it closed. The gateway
    routes a request when it arrives, not when the client sent it, so one sent just before the
    release changed may meet the next release; only a request whose whole life lies inside the
    window is known to have met this one."""
    a, b = window
    return [r for r in records if r.final and r.outcome != "abandoned" and a <= r.t_send and r.t_end < b]


def _canary(r: RequestRecord, canary: str) -> bool:
    return default_pool_of(r.served_by) == canary


def _admitted(r: RequestRecord, admit: Mapping[str, Sequence[str]] | None) -> bool:
    return not admit or all((r.attrs or {}).get(h) in vals for h, vals in admit.items())


def shadow_gate(records: Sequence[RequestRecord], pairs: Sequence[Mapping[str, Any]], *,
                before: tuple[float, float], during: tuple[float, float], tol: Tolerance = Tolerance(),
                canary: str = "canary") -> Verdict:
    """The shadow stage's gate (see the module docstring); `pairs` as the gateway's /admin/mirror."""
    v = Verdict("gray release: shadow gate", window=during)
    users = _final_in(records, during)
    seen = [r for r in users if _canary(r, canary)]
    v.add("users answered by the canary", 0, len(seen), not seen,
          f"of {len(users)} user requests" + (f"; first {seen[0].request_id}" if seen else ""))
    _compare(v, "users under shadow", _items(_final_in(records, before)), _items(users), tol)
    classes = {r.request_id: r.prompt_class or "-" for r in records}
    inside = [p for p in pairs if during[0] <= float(p["t"]) < during[1] + 60]  # a pair is kept once the canary answers
    v.add("shadow pairs", f">= {tol.min_pairs}", len(inside), len(inside) >= tol.min_pairs,
          "mirrored requests whose canary answer came back")
    stable = [(classes.get(p["request_id"], "-"), p["stable"].get("status") == 200, p["stable"].get("latency_s"))
              for p in inside]
    cand = [(classes.get(p["request_id"], "-"), p["canary"].get("status") == 200, p["canary"].get("latency_s"))
            for p in inside]
    _compare(v, "canary on shadow pairs", stable, cand, tol)
    both = [p for p in inside if p["stable"].get("status") == 200 and p["canary"].get("status") == 200]
    scores = [diff_score(p["stable"].get("text", ""), p["canary"].get("text", "")) for p in both]
    score = sum(scores) / len(scores) if scores else None
    differ = sum(1 for s in scores if s > 0)
    v.add("response diff score", f"< {tol.max_diff_score:g}", "-" if score is None else round(score, 4),
          score is not None and score < tol.max_diff_score,
          f"{differ} of {len(both)} answered pairs differ" if both else "no pair answered on both sides")
    v.data["pairs"] = len(inside)
    return v


def live_gate(records: Sequence[RequestRecord], *, during: tuple[float, float],
              admit: Mapping[str, Sequence[str]] | None, tol: Tolerance = Tolerance(),
              canary: str = "canary") -> Verdict:
    """A live stage's gate: only admitted requests reached the canary, and it served them as stable did."""
    v = Verdict("gray release: live gate", window=during)
    users = _final_in(records, during)
    served = [r for r in users if _canary(r, canary)]
    if admit:
        strays = [r for r in served if not _admitted(r, admit)]
        shown = ", ".join(f"{h}={(strays[0].attrs or {}).get(h)}" for h in admit) if strays else ""
        v.add("canary answers outside the stage", 0, len(strays), not strays,
              f"admitted {dict((h, list(vals)) for h, vals in admit.items())}" + (f"; first: {shown}" if strays else ""))
    eligible = [r for r in users if _admitted(r, admit)]
    v.add("canary answers", f">= {tol.min_pairs}", len(served), len(served) >= tol.min_pairs,
          f"of {len(eligible)} admitted user requests")
    base = [r for r in eligible if not _canary(r, canary)]
    _compare(v, "canary vs stable", _items(base), _items(served), tol)
    return v
