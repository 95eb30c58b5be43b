"""Answers that stay right across a fault: greedy, seeded answers compared with their golden ones.

Requests sent with temperature 0 and a fixed seed have one right answer per prompt; the steady state
gives it (`golden`: a prompt whose steady answers disagree has none and is left out, counted). Every
final answer before, during and after a fault is compared with it. vLLM on CPU is not bit-exact
across batch shapes, so some divergence happens with no fault: the tolerance is that measured rate,
from a no-fault run at the same load, and a fault fails when its divergence exceeds it with the
stated confidence (Fisher's exact test, one-sided: could the fault run's divergent answers have
landed there by chance, given both runs' counts?). The rows name the divergent requests.

Across a fault (`answers_across_fault`, every recovery and breaker scenario): the load's records keep a
digest of each greedy, seeded answer (LoadConfig.answers); the steady state before the fault gives the
golden answers (each prompt's majority answer) and, from the same answers, the tolerance: how often they
disagreed with their own majority there. A pass also needs power: with so few steady answers that even
`detect_share` (2 %) more of the run's answers diverging would not stand out, it is "not proven", never a pass.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chaos.verify.verdict import Verdict

if TYPE_CHECKING:
    from chaos.load.records import RequestRecord

# the checklist item the answers rows prove (rows not proven leave only it unproven)
ANSWER_ITEMS = ("answers-stable",)
ANSWERS_ITEM = ANSWER_ITEMS[0]  # the checklist item the answers verdicts alone prove (chaos.report.checklist)
ANSWERS_JUDGED = "answers_judged"  # set in the data of every answers-across-a-fault verdict


@dataclass(frozen=True)
class Answer:
    """One final answer: the request, its prompt, and the answer (text or token ids, compared exactly)."""

    request_id: str
    prompt: str
    answer: str | tuple[int, ...]


def golden(steady: Iterable[Answer]) -> tuple[dict[str, str | tuple[int, ...]], list[str]]:
    """(prompt -> its one steady-state answer, prompts whose steady answers disagreed)."""
    seen: dict[str, set[str | tuple[int, ...]]] = defaultdict(set)
    for a in steady:
        seen[a.prompt].add(a.answer)
    gold = {p: next(iter(v)) for p, v in seen.items() if len(v) == 1}
    return gold, sorted(p for p, v in seen.items() if len(v) > 1)


def majority_golden(steady: Iterable[Answer]) -> tuple[dict[str, str | tuple[int, ...]], list[str]]:
    """(prompt -> its most frequent steady answer, prompts with a tie for the most frequent): a prompt
    whose steady answers disagree keeps its majority, and the minority is the measured nondeterminism."""
    seen: dict[str, Counter[str | tuple[int, ...]]] = defaultdict(Counter)
    for a in steady:
        seen[a.prompt][a.answer] += 1
    gold, tied = {}, []
    for p, c in seen.items():
        (top, n), *rest = c.most_common(2)
        if rest and rest[0][1] == n:
            tied.append(p)
        else:
            gold[p] = top
    return gold, sorted(tied)


def divergent(answers: Iterable[Answer], gold: dict[str, str | tuple[int, ...]]) -> tuple[int, list[Answer]]:
    """(answers judged: those with a golden answer, the ones that differ from it)."""
    judged = [a for a in answers if a.prompt in gold]
    return len(judged), [a for a in judged if a.answer != gold[a.prompt]]


def fisher_greater(k: int, n: int, k0: int, n0: int) -> float:
    """One-sided Fisher exact p-value that the rate k/n is higher than k0/n0 (P of >= k of the k + k0
    divergences falling in the n requests, all n + n0 alike)."""
    total, K = n + n0, k + k0
    denom = math.comb(total, K)
    return sum(math.comb(n, i) * math.comb(n0, K - i) for i in range(k, min(n, K) + 1)) / denom


def answers_verdict(run: Sequence[Answer], baseline: Sequence[Answer], gold: dict[str, str | tuple[int, ...]],
                    *, confidence: float = 0.99, name: str = "answers", unstable: Sequence[str] = (),
                    items: Sequence[str] = ()) -> Verdict:
    """Judge `run`'s answers against `gold`, with `baseline` (a no-fault run at the same load) as the tolerance.

    `items`: the checklist items a row not proven leaves unproven (empty: every item of the test)."""
    v = Verdict(name)
    v.add("golden_prompts", "> 0", len(gold), None,
          f"{len(unstable)} prompt(s) had no single steady answer and are not judged" if unstable else "")
    n0, base_wrong = divergent(baseline, gold)
    n, wrong = divergent(run, gold)
    if not gold or n == 0:
        v.not_proven("answer_divergence", "<= no-fault rate", f"{len(wrong)}/{n}",
                     "no answer of the run has a golden answer to compare with", items=items)
        return v
    if n0 == 0:
        v.not_proven("answer_divergence", "<= no-fault rate", f"{len(wrong)}/{n}",
                     "no no-fault run was measured: the tolerance (batch nondeterminism) is unknown", items=items)
        return v
    v.add("no_fault_divergence", "measured", f"{len(base_wrong)}/{n0}", None,
          f"{100 * len(base_wrong) / n0:.2f} % with no fault (the tolerance)")
    p = fisher_greater(len(wrong), n, len(base_wrong), n0)
    ok = p >= 1 - confidence
    ids = ", ".join(a.request_id for a in wrong[:20]) + (f" and {len(wrong) - 20} more" if len(wrong) > 20 else "")
    v.add("answer_divergence", f"<= {100 * len(base_wrong) / n0:.2f} % (no-fault) at {confidence:.0%}",
          f"{len(wrong)}/{n} ({100 * len(wrong) / n:.2f} %)", ok,
          f"p={p:.2g}" + (f"; wrong answers: {ids}" if wrong else ""))
    v.data.update(wrong=[a.request_id for a in wrong], baseline_wrong=[a.request_id for a in base_wrong], p_value=p)
    return v


def answers_of(records: Iterable[RequestRecord]) -> list[Answer]:
    """The final, successful records' answers (those the greedy load kept a digest of), each keyed by its
    prompt and the replica that served it where the record names one ("short-3@stable/replica-a"). Replicas
    of one model may rightly answer a greedy prompt differently (a TP 2 replica sums its all-reduce in
    another order than a TP 1 one, and a near-flat logit flips): a fault that moves traffic between them
    must not read as answers changing, so each replica's answers are held to its own steady ones."""
    return [Answer(r.request_id, f"{r.prompt_key}@{r.served_by}" if r.served_by else r.prompt_key, r.answer)
            for r in records if r.final and r.ok and r.answer is not None and r.prompt_key is not None]


def smallest_flagged(n: int, k0: int, n0: int, alpha: float) -> int | None:
    """The fewest divergent answers of `n` that Fisher's test flags against `k0` of `n0` at `alpha`, None if none."""
    if n == 0 or n0 == 0 or fisher_greater(n, n, k0, n0) >= alpha:
        return None
    lo, hi = 0, n  # p falls as k grows: the least k with p < alpha
    while lo < hi:
        mid = (lo + hi) // 2
        if fisher_greater(mid, n, k0, n0) < alpha:
            hi = mid
        else:
            lo = mid + 1
    return lo


def answers_across_fault(records: Sequence[RequestRecord], t_fault: float, *, confidence: float = 0.99,
                         detect_share: float = 0.02, name: str = "answers",
                         items: Sequence[str] = ANSWER_ITEMS) -> Verdict:
    """Every answer that ended after `t_fault` judged against the steady state's (those that ended before).

    Golden: each prompt's majority steady answer; tolerance: the steady answers' own disagreement with it. A
    pass needs the power to see `detect_share` more of the answers diverge than that; else it is not proven,
    and why."""
    v = _across_fault(records, t_fault, confidence=confidence, detect_share=detect_share, name=name, items=items)
    v.data[ANSWERS_JUDGED] = True
    return v


def _across_fault(records: Sequence[RequestRecord], t_fault: float, *, confidence: float, detect_share: float,
                  name: str, items: Sequence[str]) -> Verdict:
    answers = answers_of(records)
    if not answers:
        v = Verdict(name)
        v.not_proven("answer_divergence", "<= steady-state rate", None,
                     "the load kept no answers (LoadConfig.answers: greedy, seeded prompts from a fixed set)",
                     items=items)
        return v
    ends = {r.request_id: r.t_end for r in records if r.final}
    steady = [a for a in answers if ends[a.request_id] < t_fault]
    run = [a for a in answers if ends[a.request_id] >= t_fault]
    gold, tied = majority_golden(steady)
    v = answers_verdict(run, steady, gold, confidence=confidence, name=name, unstable=tied, items=items)
    v.rows[0].detail = (f"{len(steady)} steady answer(s) before the fault over {len(gold) + len(tied)} prompt(s)"
                        + (f"; {v.rows[0].detail}" if v.rows[0].detail else ""))
    row = next((r for r in v.rows if r.check == "answer_divergence"), None)
    if row is None or row.ok is not True:
        return v  # failed (the wrong answers named), or already not proven
    n, _ = divergent(run, gold)
    n0, base_wrong = divergent(steady, gold)
    least = smallest_flagged(n, len(base_wrong), n0, 1 - confidence)
    if least is None or least > math.ceil((len(base_wrong) / n0 + detect_share) * n):
        v.rows.remove(row)
        can = "no share" if least is None else f"{least}/{n} ({100 * least / n:.1f} %)"
        v.not_proven("answer_divergence", row.limit, row.measured,
                     f"too few steady answers ({n0}) to tell {detect_share:.0%} more of {n} answers diverging than "
                     f"the steady state's own rate: {can} would stand out", items=items)
    return v


__all__ = ["ANSWERS_ITEM", "ANSWERS_JUDGED", "ANSWER_ITEMS", "Answer", "answers_across_fault", "answers_of",
           "answers_verdict", "divergent", "fisher_greater", "golden", "majority_golden", "smallest_flagged"]
