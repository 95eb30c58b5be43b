"""Answers that stay right across a fault: greedy, seeded answers compared with their golden ones.

Requests sent with temperature 0 and a fixed seed have one right answer per prompt; the steady state
gives it (`golden`: a prompt whose steady answers disagree has none and is left out, counted). Every
final answer before, during and after a fault is compared with it. vLLM on CPU is not bit-exact
across batch shapes, so some divergence happens with no fault: the tolerance is that measured rate,
from a no-fault run at the same load, and a fault fails when its divergence exceeds it with the
stated confidence (Fisher's exact test, one-sided: could the fault run's divergent answers have
landed there by chance, given both runs' counts?). The rows name the divergent requests.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from chaos.verify.verdict import Verdict


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
                    *, confidence: float = 0.99, name: str = "answers", unstable: Sequence[str] = ()) -> Verdict:
    """Judge `run`'s answers against `gold`, with `baseline` (a no-fault run at the same load) as the tolerance."""
    v = Verdict(name)
    v.add("golden_prompts", "> 0", len(gold), None,
          f"{len(unstable)} prompt(s) had no single steady answer and are not judged" if unstable else "")
    n0, base_wrong = divergent(baseline, gold)
    n, wrong = divergent(run, gold)
    if not gold or n == 0:
        v.not_proven("answer_divergence", "<= no-fault rate", f"{len(wrong)}/{n}",
                     "no answer of the run has a golden answer to compare with")
        return v
    if n0 == 0:
        v.not_proven("answer_divergence", "<= no-fault rate", f"{len(wrong)}/{n}",
                     "no no-fault run was measured: the tolerance (batch nondeterminism) is unknown")
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


__all__ = ["Answer", "answers_verdict", "divergent", "fisher_greater", "golden"]
