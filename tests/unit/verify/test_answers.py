"""The correctness verdict on recorded answers: planted corruption is caught and named, batch
nondeterminism at the no-fault rate and a restart (same answers) are not flagged."""
from __future__ import annotations

import random

from chaos.verify.answers import Answer, answers_verdict, fisher_greater, golden

PROMPTS = [f"prompt {i}" for i in range(40)]


def _run(tag: str, n: int, *, wrong_rate: float, seed: int) -> list[Answer]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        p = PROMPTS[i % len(PROMPTS)]
        out.append(Answer(f"{tag}-{i}", p, f"answer to {p}" + (" (wrong)" if rng.random() < wrong_rate else "")))
    return out


def test_golden_answers_leave_out_prompts_that_disagree_in_the_steady_state():
    gold, unstable = golden([Answer("a", "x", "1"), Answer("b", "x", "1"), Answer("c", "y", "1"), Answer("d", "y", "2")])
    assert gold == {"x": "1"} and unstable == ["y"]


def test_two_percent_planted_corruption_is_caught_naming_the_requests():
    gold, _ = golden(_run("steady", 80, wrong_rate=0, seed=1))
    baseline = _run("base", 1000, wrong_rate=0.001, seed=2)  # a little batch nondeterminism
    run = _run("fault", 1000, wrong_rate=0.02, seed=3)
    v = answers_verdict(run, baseline, gold)
    row = v.row("answer_divergence")
    wrong = [a.request_id for a in run if a.answer.endswith("(wrong)")]
    assert row.ok is False and v.data["wrong"] == wrong and len(wrong) >= 10
    assert wrong[0] in row.detail


def test_a_no_fault_run_and_a_restart_pass():
    gold, _ = golden(_run("steady", 80, wrong_rate=0, seed=1))
    baseline = _run("base", 1000, wrong_rate=0.003, seed=2)
    again = _run("again", 1000, wrong_rate=0.003, seed=4)  # the same load, no fault: the same rate
    restart = _run("restart", 300, wrong_rate=0, seed=5)   # a restarted replica, unchanged model
    assert answers_verdict(again, baseline, gold).row("answer_divergence").ok is True
    assert answers_verdict(restart, baseline, gold).row("answer_divergence").ok is True


def test_without_a_no_fault_run_the_verdict_is_not_proven():
    gold, _ = golden(_run("steady", 80, wrong_rate=0, seed=1))
    v = answers_verdict(_run("fault", 100, wrong_rate=0.5, seed=3), [], gold)
    assert v.row("answer_divergence").unproven and v.row("answer_divergence").ok is None


def test_fisher_tail():
    assert fisher_greater(0, 10, 0, 10) == 1.0
    assert abs(fisher_greater(5, 5, 0, 5) - 1 / 252) < 1e-12  # all 5 of 10 in the first half: 1/C(10,5)
