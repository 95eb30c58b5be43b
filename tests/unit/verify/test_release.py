"""Gray-release gates on crafted records and shadow pairs: a clean stage passes, each departure fails."""
from __future__ import annotations

import random

from chaos.load.records import RequestRecord
from chaos.verify.release import Tolerance, diff_score, live_gate, shadow_gate

T0 = 1_700_000_000.0
BEFORE, DURING = (T0, T0 + 15), (T0 + 15, T0 + 45)
WORDS = "the quick brown fox jumps over the lazy dog again and again".split()


def users(n: int = 900, *, canary_every: int = 0, attrs=None, seed: int = 1) -> list[RequestRecord]:
    rng, out = random.Random(seed), []
    for i in range(n):
        pool = "canary" if canary_every and i % canary_every == 0 else "stable"
        out.append(RequestRecord(f"r{i}", 1, T0 + i * 0.05, e2e=rng.uniform(0.2, 0.4), status=200,
                                 served_by=f"{pool}/x", prompt_class=rng.choice(["short", "long"]), outcome="succeeded",
                                 attrs=attrs(i) if attrs else None))
    return out


def pairs(records, *, drift_every: int = 0, every: int = 3) -> list[dict]:
    out = []
    for i, r in enumerate(records):
        if not DURING[0] <= r.t_send < DURING[1] or i % every:
            continue
        text = " ".join(WORDS[i % 3:i % 3 + 8])
        other = " ".join(reversed(text.split())) if drift_every and i % drift_every == 0 else text
        out.append({"t": r.t_send, "request_id": r.request_id,
                    "stable": {"status": 200, "latency_s": r.e2e, "text": text},
                    "canary": {"status": 200, "latency_s": r.e2e * 1.1, "text": other}})
    return out


def test_diff_score():
    assert diff_score("a b c", "a b c") == 0.0
    assert diff_score("a b c d", "x y z w") == 1.0
    assert 0 < diff_score("a b c d", "a b c e") < 0.5


def test_a_clean_shadow_stage_passes():
    recs = users()
    v = shadow_gate(recs, pairs(recs), before=BEFORE, during=DURING)
    assert v.ok, [r.line() for r in v.failures]
    assert v.row("response diff score").measured == 0.0 and v.data["pairs"] >= 50


def test_a_planted_answer_difference_fails_the_shadow_gate():
    recs = users()
    v = shadow_gate(recs, pairs(recs, drift_every=30), before=BEFORE, during=DURING)  # 1 in 10 pairs differ
    assert not v.ok and [r.check for r in v.failures] == ["response diff score"]
    assert "differ" in v.row("response diff score").detail


def test_a_user_answered_by_the_canary_fails_the_shadow_gate():
    recs = users(canary_every=97)
    v = shadow_gate(recs, pairs(recs), before=BEFORE, during=DURING)
    assert "users answered by the canary" in [r.check for r in v.failures]


def test_too_few_pairs_judge_nothing():
    recs = users()
    v = shadow_gate(recs, pairs(recs, every=100), before=BEFORE, during=DURING)
    assert "shadow pairs" in [r.check for r in v.failures]


def test_a_slower_canary_fails_on_its_class_p99():
    recs = users()
    ps = pairs(recs)
    for p in ps:
        p["canary"]["latency_s"] = p["stable"]["latency_s"] * 3
    v = shadow_gate(recs, ps, before=BEFORE, during=DURING, tol=Tolerance(max_p99_ratio=1.5))
    assert {r.check for r in v.failures} == {"canary on shadow pairs P99 [short]", "canary on shadow pairs P99 [long]"}


def tiers(i: int) -> dict[str, str]:
    return {"x-user-tier": "vip" if i % 5 == 0 else "standard"}


def test_a_live_stage_passes_when_only_admitted_tiers_reach_the_canary():
    recs = users(canary_every=4, attrs=lambda i: {"x-user-tier": "standard" if i % 4 == 0 else tiers(i)["x-user-tier"]})
    v = live_gate(recs, during=DURING, admit={"x-user-tier": ["standard"]})
    assert v.ok, [r.line() for r in v.failures]


def test_a_vip_request_on_the_canary_fails_the_live_stage():
    recs = users(canary_every=4, attrs=tiers)  # i = 0, 20, 40, ... are VIP and on the canary
    v = live_gate(recs, during=DURING, admit={"x-user-tier": ["standard"]})
    row = v.row("canary answers outside the stage")
    assert row.ok is False and row.measured > 0 and "x-user-tier=vip" in row.detail


def test_a_request_still_in_flight_when_the_stage_ends_is_not_judged_by_it():
    # sent before the rollback began, routed after it (the restored release lets the canary serve
    # everyone): it met the next release, not this one
    recs = users(canary_every=4, attrs=lambda i: {"x-user-tier": "standard"})
    late = RequestRecord("late", 1, DURING[1] - 0.01, e2e=0.05, status=200, served_by="canary/x", prompt_class="short",
                         outcome="succeeded", attrs={"x-user-tier": "vip"})
    v = live_gate([*recs, late], during=DURING, admit={"x-user-tier": ["standard"]})
    assert v.ok and v.row("canary answers outside the stage").measured == 0, [r.line() for r in v.rows]
    # the same request answered before the rollback began was routed by this stage: a stray
    early = RequestRecord("early", 1, DURING[1] - 0.1, e2e=0.05, status=200, served_by="canary/x", prompt_class="short",
                          outcome="succeeded", attrs={"x-user-tier": "vip"})
    v = live_gate([*recs, early], during=DURING, admit={"x-user-tier": ["standard"]})
    assert v.row("canary answers outside the stage").measured == 1


def test_pairs_are_timed_at_the_replicas_where_the_fault_proxies_logged_both_sides():
    from chaos.experiment.gates import replica_timed

    pair = {"t": 1.0, "request_id": "r1", "stable": {"status": 200, "latency_s": 0.10, "replica": "stable/replica-a"},
            "canary": {"status": 200, "latency_s": 0.44, "replica": "canary/replica-c"}}
    half = {**pair, "request_id": "r2"}
    rows = [{"request_id": "r1", "t_arrival": 10.0, "t_finish": 10.08, "replica": "replica-a"},
            {"request_id": "r1", "t_arrival": 11.0, "t_finish": 11.09, "replica": "replica-c"},
            {"request_id": "r2", "t_arrival": 12.0, "t_finish": 12.05, "replica": "replica-a"}]
    out, timed = replica_timed([pair, half], rows)
    assert timed == 1
    assert out[0]["stable"]["latency_s"] == 0.08 and out[0]["canary"]["latency_s"] == 0.09
    assert out[1] == half  # only one side in the log: the gateway's timings for both, never a mix
    assert pair["canary"]["latency_s"] == 0.44  # the gateway's pairs themselves are left as they were
