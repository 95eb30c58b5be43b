"""The load verdict can fail on what a serving team watches: failed attempts are SLO misses (retries
do not hide them), rejections are errors, goodput has a floor, a baseline names the classes that
regressed, the 32k class has its own failure rate, and a burst's drift is judged."""
from __future__ import annotations

import json

import pytest

from chaos.env.model import DegradedFloor, LatencySLA, SLAs
from chaos.errors import ConfigError
from chaos.load import baseline as bl
from chaos.load.records import RequestRecord
from chaos.verify.load import burst_drift, degraded_floor_verdict, load_verdict, long_prompt_failures, regressed_classes

SLA = SLAs(latency={"short": LatencySLA(ttft_p99_s=0.5, e2e_p99_s=2.0), "xl": LatencySLA(ttft_p99_s=4.0, e2e_p99_s=8.0)},
           error_budget=0.01, min_goodput_share=0.95)


def clean(cls: str, n: int, e2e: float = 0.3, ttft: float = 0.1, t0: float = 100.0) -> list[RequestRecord]:
    return [RequestRecord(f"{cls}{i}", 1, t0 + i * 0.1, ttft=ttft, e2e=e2e, tpot=0.01, gaps=[0.01, 0.012],
                          output_tokens=16, prompt_class=cls, outcome="succeeded") for i in range(n)]


def failed_then_retried(cls: str, n: int, t0: float = 500.0) -> list[RequestRecord]:
    """n logical requests whose first attempt failed (500) and whose retry succeeded."""
    out = []
    for i in range(n):
        out.append(RequestRecord(f"{cls}r{i}", 1, t0 + i, status=500, error="http", prompt_class=cls, final=False))
        out.append(RequestRecord(f"{cls}r{i}", 2, t0 + i + 0.6, ttft=0.1, e2e=0.3, output_tokens=16, prompt_class=cls,
                                 outcome="succeeded"))
    return out


def test_a_clean_run_passes():
    v = load_verdict(clean("short", 200) + clean("xl", 50, e2e=3.0, ttft=1.0), SLA)
    assert v.ok, v.failures
    assert v.row("short.e2e_p99").measured == pytest.approx(0.3) and v.row("short.goodput_share").measured == 1.0


@pytest.mark.parametrize("top, ok", [(1.999, True), (2.001, False)])
def test_the_p99_limit_is_inclusive_per_class(top, ok):
    recs = clean("short", 97) + clean("short", 3, e2e=top, t0=700.0)  # 3 of 100 at the top: the P99 lands there
    assert load_verdict(recs, SLA).row("short.e2e_p99").ok is ok


def test_two_percent_failed_attempts_break_the_p99_although_every_user_got_an_answer():
    recs = clean("short", 196) + failed_then_retried("short", 4)  # 4 of 204 attempts failed: 2 %
    v = load_verdict(recs, SLA)
    row = v.row("short.e2e_p99")
    assert row.ok is False and row.measured == "miss (4 of 204 attempts failed)"
    assert v.row("short.error_rate").ok is True  # the users were answered: the misses are what tells
    one = load_verdict(clean("short", 199) + failed_then_retried("short", 1), SLA)
    assert one.row("short.e2e_p99").ok is True  # 1 of 201: within the 1 % a P99 allows


def test_rejected_requests_are_errors_and_slow_answers_cut_goodput():
    rejected = [RequestRecord(f"rej{i}", 1, 300.0 + i, status=429, error="rejected", prompt_class="short",
                              outcome="rejected") for i in range(3)]
    v = load_verdict(clean("short", 97) + rejected, SLA)
    assert v.row("short.error_rate").measured == 0.03 and v.row("short.error_rate").ok is False
    slow = clean("short", 90) + clean("short", 10, e2e=2.5, t0=900.0)
    w = load_verdict(slow, SLA)
    assert w.row("short.e2e_p99").ok is False and w.row("short.goodput_share").measured == 0.9
    assert w.row("short.goodput_share").ok is False


def test_a_class_with_too_few_requests_is_shown_not_judged():
    v = load_verdict(clean("short", 200) + clean("xl", 3, e2e=20.0), SLA)
    row = v.row("xl.e2e_p99")
    assert row.ok is None and "fewer than 10: not judged" in row.detail and v.ok


def test_the_baseline_names_the_classes_that_regressed(tmp_path):
    env = type("E", (), {"name": "t", "source": str(tmp_path / "none.yaml"), "slas": SLA,
                         "model_dump_json": lambda self: "{}"})()
    doc = bl.record(clean("short", 200) + clean("xl", 50, e2e=3.0), env=env, workload="mix", rel=0.2, abs_s=0.0)
    path = bl.write(tmp_path / "b.json", doc)
    base = bl.read(path)
    assert base["classes"]["short"]["e2e"] == {"50": 0.3, "99": 0.3} and base["version"] == 2
    assert base["gpu"] == {"visible": False, "why": "no GPU visible"} and base["env_hash"].startswith("sha256:")
    same = load_verdict(clean("short", 200) + clean("xl", 50, e2e=3.0), SLA, baseline=base)
    assert same.ok and regressed_classes(same) == []
    worse = load_verdict(clean("short", 200, e2e=0.37) + clean("xl", 50, e2e=3.0), SLA, baseline=base)
    assert regressed_classes(worse) == ["short"]
    assert worse.row("short.e2e_p50_vs_baseline").ok is False and worse.row("xl.e2e_p50_vs_baseline").ok is True


@pytest.mark.parametrize("text, field", [
    ("[1]", "'classes'"), ('{"classes": {"short": {"e2e": {"99": "fast"}}}}', "classes.short.e2e"),
    ('{"version": 7, "classes": {}}', "'version'"), ('{"classes": {}, "tolerance": {"rel": -1}}', "tolerance.rel"),
])
def test_a_bad_baseline_file_is_one_line_naming_the_field(tmp_path, text, field):
    p = tmp_path / "b.json"
    p.write_text(text)
    with pytest.raises(ConfigError, match=field) as caught:
        bl.read(p)
    assert str(p) in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(ConfigError, match="chaos baseline record"):
        bl.read(tmp_path / "missing.json")


def test_the_32k_class_has_its_own_failure_rate_over_attempts():
    recs = clean("xl", 98) + failed_then_retried("xl", 2)
    v = long_prompt_failures(recs, "xl", 0.01)
    assert v.row("xl.attempt_failure_rate").measured == pytest.approx(0.0196, abs=1e-4) and not v.ok
    assert long_prompt_failures(clean("xl", 100), "xl", 0.01).ok


def test_burst_drift_compares_the_last_requests_with_the_first():
    flat = clean("xl", 100, e2e=3.0)
    assert burst_drift(flat, "xl").ok
    growing = [RequestRecord(f"x{i}", 1, 100.0 + i * 10, ttft=1.0, e2e=3.0 + i * 0.05, prompt_class="xl",
                             outcome="succeeded") for i in range(100)]
    v = burst_drift(growing, "xl")
    assert v.row("e2e_last10_over_first10").measured == pytest.approx((3.0 + 94.5 * 0.05) / (3.0 + 4.5 * 0.05), abs=1e-3)
    assert not v.ok
    assert burst_drift(flat[:15], "xl").row("e2e_last10_over_first10").ok is None
    assert json.dumps(v.data)  # the per-request series goes into the report


def test_the_degraded_floor_fails_below_its_tokens_or_above_its_p99():
    floor = DegradedFloor(min_tokens_per_s=100, max_e2e_p99_s=2.0)
    fine = clean("short", 100)  # 16 tokens each over 9.9 + 0.3 s: 157 tokens/s
    assert degraded_floor_verdict(fine, floor).ok
    slow = clean("short", 20, e2e=2.5)  # 320 tokens over 4.4 s: 73 tokens/s
    v = degraded_floor_verdict(slow, floor)
    assert v.row("tokens_per_s").ok is False and v.row("e2e_p99_s").ok is False
    failing = clean("short", 97) + failed_then_retried("short", 2)
    assert degraded_floor_verdict(failing, floor).row("e2e_p99_s").measured == "miss (2 of 101 attempts failed)"


def _baseline(tmp_path, records, rel=0.2):
    env = type("E", (), {"name": "t", "source": str(tmp_path / "none.yaml"), "slas": SLA,
                         "model_dump_json": lambda self: "{}"})()
    return bl.read(bl.write(tmp_path / "b.json", bl.record(records, env=env, workload="mix", rel=rel, abs_s=0.0)))


def test_a_p99_is_compared_only_from_enough_attempts_on_both_sides(tmp_path):
    """Below 100 attempts a nearest-rank P99 is the sample's maximum: one request. Such a row is
    shown, not judged; the class's P50 still is, and still fails on a regression."""
    base = _baseline(tmp_path, clean("short", 200) + clean("xl", 50, e2e=3.0))
    slower_tail = clean("short", 200) + clean("xl", 49, e2e=3.0) + clean("xl", 1, e2e=7.0, t0=900.0)
    v = load_verdict(slower_tail, SLA, baseline=base)
    row = v.row("xl.e2e_p99_vs_baseline")
    assert row.ok is None and "50 attempts, fewer than the 100 a P99 is estimated from" in row.detail
    assert row.measured == 7.0 and v.row("xl.e2e_p50_vs_baseline").ok is True
    # the same tail in a class with enough attempts on both sides is judged, and fails
    tail = clean("short", 195) + clean("short", 5, e2e=0.9, t0=900.0) + clean("xl", 50, e2e=3.0)
    assert load_verdict(tail, SLA, baseline=base).row("short.e2e_p99_vs_baseline").ok is False
    # a run with too few attempts is not judged against a baseline that had enough
    few = load_verdict(clean("short", 60, e2e=0.9) + clean("xl", 50, e2e=3.0), SLA, baseline=base)
    assert few.row("short.e2e_p99_vs_baseline").ok is None
    assert few.row("short.e2e_p50_vs_baseline").ok is False
    assert regressed_classes(few) == ["short"]


def test_a_baseline_diff_of_two_files_applies_the_same_rules(tmp_path):
    from chaos.commands.baseline import _doc_verdict

    base = _baseline(tmp_path, clean("short", 200) + clean("xl", 50, e2e=3.0))
    other = dict(base, classes={"short": dict(base["classes"]["short"], e2e={"50": 0.5, "99": 0.5})})
    v = _doc_verdict(base, other)
    assert v.row("short.e2e_p50_vs_baseline").ok is False and v.row("short.e2e_p99_vs_baseline").ok is False
    assert v.row("xl.e2e_p50_vs_baseline").ok is False  # the class is missing from the other file: a miss
    assert v.row("xl.e2e_p99_vs_baseline").ok is None  # 50 attempts in the baseline: not judged
