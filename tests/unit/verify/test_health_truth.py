"""Health that tells the truth: lie windows found on constructed timelines, in both directions, and a
missing or interrupted probe is "not proven", never a pass."""
from __future__ import annotations

from collections.abc import Callable

import pytest

from chaos.env import parse
from chaos.env.model import SLAs
from chaos.errors import ConfigError
from chaos.load.records import RequestRecord
from chaos.observe.timeline import Timeline
from chaos.verify.health_truth import HEALTHY_LIE, KNOWN_LIES, UNHEALTHY_LIE, compare, health_truth_rows
from chaos.verify.recovery import recovery_verdict
from chaos.verify.verdict import Verdict

T0 = 1000.0  # the fault's injection


def timeline(health: Callable[[float], int | None], ok: Callable[[float], bool], *, until: float = 40.0,
             status: int = 500, sources: tuple[str, str] = ("health", "completion")) -> Timeline:
    """/health at 10 Hz and completions at ~3 Hz from t-10 to t+until, states given relative to the fault."""
    tl = Timeline(clock=lambda: 0.0)
    for i in range(int((until + 10) * 10)):
        d = round(-10 + i * 0.1, 3)
        tl.sample(sources[0], "status", health(d), t=T0 + d)
        if i % 3 == 0:
            good = ok(d)
            tl.sample(sources[1], "ok", good, t=T0 + d, error="" if good else "http", status="200" if good else str(status))
    return tl


def rows(tl: Timeline, limit: float = 5.0, fault: str | None = "tp-worker-sigkill",
         records: list[RequestRecord] | None = None, judged: tuple[str, ...] = ("/health", "/v1/models")) -> Verdict:
    v = Verdict("recovery")
    health_truth_rows(v, tl, T0, limit, records=records or [], fault=fault, judged=judged)
    return v


def test_a_healthy_lie_is_found_and_fails_past_the_sla() -> None:
    """vLLM 0.32 after a TP worker's SIGKILL: /health 200 for 9.6 s while completions fail."""
    tl = timeline(lambda d: 200 if d < 9.9 else 503, lambda d: not 0.2 <= d)
    row = rows(tl).row("health_truth /health")
    assert row.ok is False and row.measured == pytest.approx(9.6, abs=0.15)
    assert "tp-worker-sigkill" in row.detail and HEALTHY_LIE in row.detail
    assert "(t+0.3..t+9.9)" in row.detail or "(t+0.2..t+9.9)" in row.detail, row.detail
    assert "/health 200, completions 500" in row.detail and "a known lie" in row.detail


def test_a_lie_the_execute_model_timeout_bounds_names_that_knob_and_its_value() -> None:
    """A rank hung in the all-reduce: /health 200 until the engine's execute-model timeout (20 s on local-vllm
    before 2026-12-05) kills it. The failing row says which setting bounds the lie and what it is here."""
    tl = timeline(lambda d: 200 if d < 20.2 else 503, lambda d: d < 0.1)
    v = Verdict("recovery")
    health_truth_rows(v, tl, T0, 5.0, fault="nccl-timeout-allreduce-hang",
                      engine_timeout=(20.0, "replica-a's vllm.execute_model_timeout_s 20"))
    row = v.row("health_truth /health")
    assert row.ok is False and row.measured == pytest.approx(20.1, abs=0.15)
    assert "a known lie" in row.detail and "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS" in row.detail
    assert "here replica-a's vllm.execute_model_timeout_s 20" in row.detail and "default 300 s" in row.detail
    # through the recovery verdict too, and a lie the timeout does not bound names no timeout
    rv = recovery_verdict((T0, T0), tl, [], SLAs(recovery_s=60.0), fault="nccl-rank-freeze",
                          engine_timeout=(300.0, "vLLM's default execute-model timeout 300"))
    assert "here vLLM's default execute-model timeout 300" in rv.row("health_truth /health").detail
    sigkill = rows(timeline(lambda d: 200 if d < 9.9 else 503, lambda d: d < 0.2)).row("health_truth /health")
    assert "a known lie" in sigkill.detail and "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS" not in sigkill.detail


def test_a_lie_under_the_sla_passes_with_a_timeout_under_it() -> None:
    """The same hang with the execute-model timeout at 4 s: the lie is 4 s, the row passes on what it measured."""
    tl = timeline(lambda d: 200 if d < 4.2 else 503, lambda d: d < 0.1)
    v = Verdict("recovery")
    health_truth_rows(v, tl, T0, 5.0, fault="nccl-timeout-allreduce-hang", engine_timeout=(4.0, "x 4"))
    row = v.row("health_truth /health")
    assert row.ok is True and row.measured == pytest.approx(4.1, abs=0.15) and "a known lie" not in row.detail


def test_an_unhealthy_lie_is_found_in_the_other_direction() -> None:
    tl = timeline(lambda d: 503 if 0 <= d < 8 else 200, lambda d: True)
    tr = compare(tl.series("health", "status"), tl.series("completion", "ok"))
    assert tr is not None and tr.longest(HEALTHY_LIE) is None
    lie = tr.longest(UNHEALTHY_LIE)
    assert lie is not None and lie.length == pytest.approx(8.0, abs=0.11) and lie.claims["503"] > 0
    row = rows(tl).row("health_truth /health")
    assert row.ok is False and f"{UNHEALTHY_LIE}: 8.0 s (t+0.0..t+8.0)" in row.detail, row.detail


def test_a_short_disagreement_passes_and_says_so() -> None:
    tl = timeline(lambda d: 200 if d < 1.0 else (None if d < 20 else 200), lambda d: not 0 <= d < 20.5)
    row = rows(tl).row("health_truth /health")
    assert row.ok is True and row.measured == pytest.approx(0.8, abs=0.01)  # 200 at t+0.2..t+1.0
    assert "refused/timeout" not in row.detail.split(HEALTHY_LIE)[0]
    assert rows(tl, limit=0.5).row("health_truth /health").ok is False  # the same lie, a tighter SLA


def test_no_probes_is_not_proven_never_a_pass() -> None:
    only_health = Timeline(clock=lambda: 0.0)
    for i in range(100):
        only_health.sample("health", "status", 200, t=T0 + i * 0.1)
    row = rows(only_health).row("health_truth /health")
    assert row.ok is None and row.unproven and "no completion probes" in row.detail
    row = rows(Timeline(clock=lambda: 0.0)).row("health_truth /health")
    assert row.ok is None and row.unproven and "no /health probes" in row.detail


def test_a_probe_gap_long_enough_to_hide_a_lie_is_not_proven() -> None:
    tl = timeline(lambda d: 200, lambda d: True)
    tl.samples = [s for s in tl.samples if not (s.source == "health" and 2 < s.t - T0 < 12)]
    row = rows(tl).row("health_truth /health")
    assert row.ok is None and row.unproven and "state unknown for 7.9 s (t+4.1..t+12.0)" in row.detail


def test_probes_that_ended_before_the_fault_prove_nothing() -> None:
    tl = timeline(lambda d: 200, lambda d: True)
    tl.samples = [s for s in tl.samples if s.t < T0 - 1]
    assert rows(tl).row("health_truth /health").unproven


def test_each_claim_endpoint_gets_its_row_and_a_404_claims_nothing() -> None:
    tl = timeline(lambda d: 200, lambda d: not 0 <= d < 7)
    for src, value in (("models", 200), ("health:api", 200), ("models:api", 404)):
        for i in range(400):
            tl.sample(src, "status", value, t=T0 - 10 + i * 0.1)
    for i in range(120):
        tl.sample("completion:api", "ok", True, t=T0 - 10 + i * 0.33)
    v = rows(tl, fault="crash-sigkill")
    assert v.row("health_truth /health").ok is False and v.row("health_truth /v1/models").ok is False
    assert "a known lie" not in v.row("health_truth /health").detail  # not a fault vLLM is known to lie on
    assert v.row("health_truth /health at api").ok is True  # the gateway's completions kept succeeding
    models_api = v.row("health_truth /v1/models at api")
    assert models_api.ok is None and models_api.unproven and "404 throughout" in models_api.detail


def test_a_probe_that_timed_out_while_load_was_served_is_slow_not_failing() -> None:
    tl = Timeline(clock=lambda: 0.0)
    for i in range(300):
        tl.sample("health", "status", 200, t=T0 - 10 + i * 0.1)
    for i in range(60):
        t = T0 - 10 + i * 0.5
        tl.sample("completion", "ok", False, t=t, error="timeout", status="")
    served = [RequestRecord(f"r{i}", 1, T0 - 10 + i * 0.5, e2e=0.5, status=200,
                            outcome="succeeded") for i in range(60)]
    assert rows(tl, records=served).row("health_truth /health").ok is True
    assert rows(tl).row("health_truth /health").ok is False  # without that traffic the timeouts are failures


def test_every_recovery_verdict_carries_the_rows_against_the_sla() -> None:
    tl = timeline(lambda d: 200 if d < 9.9 else 503, lambda d: not 0.2 <= d < 30)
    v = recovery_verdict((T0, T0), tl, [], SLAs(recovery_s=60.0, health_truth_s=10.0), fault="tp-worker-sigkill")
    row = v.row("health_truth /health")
    assert row.limit == 10.0 and row.ok is True and "tp-worker-sigkill" in row.detail
    strict = recovery_verdict((T0, T0), tl, [], SLAs(recovery_s=60.0, health_truth_s=5.0))
    assert strict.row("health_truth /health").ok is False and not strict.ok


def test_the_sla_defaults_and_a_bad_value_is_one_line() -> None:
    assert SLAs().health_truth_s == 5.0
    text = "name: t\nendpoints: {api: 'http://127.0.0.1:1'}\nslas: {health_truth_s: 0}\n"
    with pytest.raises(ConfigError) as e:
        parse(text, "env.yaml", environ={})
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("env.yaml") and "slas.health_truth_s" in msg


def test_an_execute_model_timeout_in_fractions_of_a_second_is_one_line() -> None:
    """vLLM reads VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS with int(): 4.5 would kill the engine, not time it out."""
    base = "name: t\nendpoints: {api: 'http://127.0.0.1:1'}\ntargets:\n  - {name: a, kind: process, port: 1, vllm: %s}\n"
    with pytest.raises(ConfigError) as e:
        parse(base % "{execute_model_timeout_s: 4.5}", "env.yaml", environ={})
    msg = str(e.value)
    assert "\n" not in msg and "targets[a].vllm.execute_model_timeout_s" in msg and "whole seconds" in msg
    ok = parse(base % "{execute_model_timeout_s: 4}", "env.yaml", environ={})
    assert ok.targets[0].vllm is not None and ok.targets[0].vllm.execute_model_timeout_s == 4.0


def test_a_claim_the_stack_does_not_act_on_is_measured_and_shown_not_judged() -> None:
    """The simulator's rank freeze: /v1/models kept answering 200 for 8.9 s (until the API server's
    engine-dead watchdog exited it) while /health told the truth within the collective timeout. With
    slas.health_truth_checks [/health] (the default) /v1/models' lie is a row with its window, unjudged."""
    tl = timeline(lambda d: 503 if 3.0 <= d < 12 else 200, lambda d: not 0.1 <= d < 12)
    for i in range(400):
        d = -10 + i * 0.1  # 200 until the API server exits at t+9, refused until it is back at t+12
        tl.sample("models", "status", None if 9.0 <= d < 12 else 200, t=T0 + d)
    v = rows(tl, fault="nccl-rank-freeze", judged=("/health",))
    assert v.row("health_truth /health").ok is True
    models = v.row("health_truth /v1/models")
    assert models.ok is None and not models.unproven and models.measured == pytest.approx(8.9, abs=0.15)
    assert "shown, not judged" in models.detail and "slas.health_truth_checks" in models.detail
    assert not v.failures
    # listed, the same lie fails the row
    assert rows(tl, fault="nccl-rank-freeze").row("health_truth /v1/models").ok is False


def test_the_recovery_suite_s_killed_rank_names_vllm_s_known_lie_but_no_timeout() -> None:
    """nccl-rank-kill (suites/recovery): /health 200 for 9.6 s after the kill while completions fail, as
    recorded on vLLM 0.32: the row fails against 5 s and names the lie; no execute-model timeout bounds it."""
    tl = timeline(lambda d: 200 if d < 9.6 else 503, lambda d: d < 0)
    row = rows(tl, fault="nccl-rank-kill").row("health_truth /health")
    assert row.ok is False and 9.4 <= row.measured <= 9.9, row.line()
    assert HEALTHY_LIE in row.detail and f"a known lie ({KNOWN_LIES['nccl-rank-kill']}" in row.detail
    assert "execute-model timeout" not in row.detail, row.detail
