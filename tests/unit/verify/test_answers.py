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


# -- across a fault: golden and tolerance from the steady state's own answers ------------------------
from chaos.load.records import RequestRecord  # noqa: E402
from chaos.verify.answers import (  # noqa: E402
    ANSWER_ITEMS,
    answers_across_fault,
    majority_golden,
    smallest_flagged,
)

T_FAULT = 1000.0


def _records(n: int, *, t0: float, tag: str, wrong: set[int] = frozenset(), prompts: int = 16) -> list[RequestRecord]:
    """`n` final answers from t0 on, 0.1 s apart, over a fixed prompt set; the `wrong` ones differ."""
    out = []
    for i in range(n):
        key = f"short-{i % prompts}"
        out.append(RequestRecord(f"{tag}{i:04d}", 1, t0 + 0.1 * i, e2e=0.05, outcome="succeeded", prompt_key=key,
                                 answer=f"digest of {key}" + ("!" if i in wrong else "")))
    return out


def test_majority_golden_keeps_the_majority_and_leaves_out_ties():
    a = [Answer("1", "x", "A"), Answer("2", "x", "A"), Answer("3", "x", "B"), Answer("4", "y", "A"),
         Answer("5", "y", "B"), Answer("6", "z", "C")]
    assert majority_golden(a) == ({"x": "A", "z": "C"}, ["y"])


def test_planted_corruption_after_the_fault_fails_naming_each_request():
    steady = _records(400, t0=T_FAULT - 50, tag="s")
    hurt = set(range(10, 1000, 50))  # 2 %
    run = _records(1000, t0=T_FAULT + 1, tag="f", wrong=hurt)
    v = answers_across_fault(steady + run, T_FAULT)
    row = v.row("answer_divergence")
    assert row.ok is False and v.data["wrong"] == [f"f{i:04d}" for i in sorted(hurt)]
    assert "f0010" in row.detail and v.row("golden_prompts").measured == 16
    assert "400 steady answer(s)" in v.row("golden_prompts").detail


def test_a_restart_with_the_same_answers_passes():
    records = _records(400, t0=T_FAULT - 50, tag="s") + _records(1000, t0=T_FAULT + 1, tag="f")
    assert answers_across_fault(records, T_FAULT).row("answer_divergence").ok is True


def _served(records: list[RequestRecord], replica: str, answer_of: dict[str, str] | None = None) -> list[RequestRecord]:
    for r in records:
        r.served_by = f"stable/{replica}"
        if answer_of and r.prompt_key in answer_of:
            r.answer = answer_of[r.prompt_key]
    return records


def test_replicas_that_answer_a_prompt_differently_are_each_held_to_their_own_answers():
    """A TP 2 replica may answer a greedy prompt otherwise than a TP 1 one: a fault that moves traffic from one
    to the other changes no answer, while a wrong answer on either is still named."""
    tp2 = {f"short-{k}": f"tp2 digest {k}" for k in range(0, 16, 3)}  # a third of the prompts differ on replica-a
    steady = (_served(_records(300, t0=T_FAULT - 80, tag="a"), "replica-a", tp2)
              + _served(_records(700, t0=T_FAULT - 80, tag="b"), "replica-b"))
    after = _served(_records(1000, t0=T_FAULT + 1, tag="f"), "replica-b")  # replica-a is down: b serves all
    v = answers_across_fault(steady + after, T_FAULT)
    assert v.row("answer_divergence").ok is True and v.row("no_fault_divergence").measured == "0/1000"
    hurt = set(range(5, 1000, 50))
    bad = _served(_records(1000, t0=T_FAULT + 1, tag="f", wrong=hurt), "replica-b")
    v = answers_across_fault(steady + bad, T_FAULT)
    assert v.row("answer_divergence").ok is False and v.data["wrong"] == [f"f{i:04d}" for i in sorted(hurt)]


def test_divergence_at_the_steady_states_own_rate_passes():
    noisy = set(range(3, 1000, 100))  # 10 of 1000 disagree with their majority before the fault
    steady = _records(1000, t0=T_FAULT - 150, tag="s", wrong=noisy)
    run = _records(1000, t0=T_FAULT + 1, tag="f", wrong=set(range(7, 1000, 100)))  # the same rate after it
    v = answers_across_fault(steady + run, T_FAULT)
    assert v.row("answer_divergence").ok is True and v.row("no_fault_divergence").measured == "10/1000"
    # as noisy, but too few steady answers to tell 2 % more from that noise: not proven
    few = _records(400, t0=T_FAULT - 50, tag="s", wrong=set(range(3, 400, 100))) + run
    assert answers_across_fault(few, T_FAULT).row("answer_divergence").unproven


def test_too_few_steady_answers_to_see_two_percent_is_not_proven_never_a_pass():
    records = _records(30, t0=T_FAULT - 5, tag="s") + _records(1000, t0=T_FAULT + 1, tag="f")
    row = answers_across_fault(records, T_FAULT).row("answer_divergence")
    assert row.ok is None and row.unproven and "too few steady answers (30)" in row.unproven
    assert row.items == ANSWER_ITEMS  # only the answers item is left unproven
    # a divergence that stands out even so is a failure, however few the steady answers
    hurt = _records(30, t0=T_FAULT - 5, tag="s") + _records(1000, t0=T_FAULT + 1, tag="f", wrong=set(range(0, 1000, 2)))
    assert answers_across_fault(hurt, T_FAULT).row("answer_divergence").ok is False


def test_without_answers_or_golden_ones_the_verdict_is_not_proven():
    plain = [RequestRecord("r", 1, T_FAULT + 1, e2e=0.1, outcome="succeeded")]
    row = answers_across_fault(plain, T_FAULT).row("answer_divergence")
    assert row.unproven and "kept no answers" in row.unproven and row.items == ANSWER_ITEMS
    after_only = _records(100, t0=T_FAULT + 1, tag="f")  # nothing answered before the fault
    assert answers_across_fault(after_only, T_FAULT).row("answer_divergence").unproven


def test_only_final_successful_answers_count_and_an_answer_in_flight_at_the_fault_is_judged():
    steady = _records(400, t0=T_FAULT - 50, tag="s")
    failed = RequestRecord("x1", 1, T_FAULT + 2, e2e=0.1, error="http", status=503, outcome="failed")
    retried = RequestRecord("x2", 1, T_FAULT + 2, e2e=0.1, final=False, prompt_key="short-0", answer="other")
    in_flight = RequestRecord("x3", 1, T_FAULT - 0.5, e2e=1.0, outcome="succeeded", prompt_key="short-0", answer="other")
    v = answers_across_fault([*steady, failed, retried, in_flight, *_records(1000, t0=T_FAULT + 3, tag="f")], T_FAULT)
    assert v.data["wrong"] == ["x3"]


def test_smallest_flagged():
    assert smallest_flagged(1000, 0, 0, 0.01) is None
    k = smallest_flagged(1000, 0, 400, 0.01)
    assert k is not None and fisher_greater(k, 1000, 0, 400) < 0.01 <= fisher_greater(k - 1, 1000, 0, 400)
