"""Recovery verdict on crafted timelines and records, with boundaries on each side."""
from __future__ import annotations

import pytest

from chaos.env.model import SLAs
from chaos.errors import ConfigError, SLOViolation
from chaos.load.records import RequestRecord
from chaos.observe.timeline import Timeline
from chaos.verify.recovery import recovery_verdict, time_to_health, time_to_steady

T_INJ, T_REV = 100.0, 110.0
SLA = SLAs(recovery_s=5.0, steady_state_s=10.0, error_budget=0.01, gpu_memory_release_s=2.0, cold_start_s=20.0)


def timeline(health_back: float, completion_back: float, gpu: bool = False) -> Timeline:
    tl = Timeline(clock=lambda: 0.0)
    t = 95.0
    while t < 140.0:
        tl.sample("health", "status", 503 if T_INJ <= t < T_REV + health_back else 200, t=t)
        tl.sample("completion", "ok", not (T_INJ <= t < T_REV + completion_back), t=t)
        if gpu:
            mem = 40e9 if t < T_INJ + 1.5 else (0.5e9 if t < T_INJ + 8 else 39e9)
            tl.sample("gpu", "mem_used", mem, t=t)
        t = round(t + 0.1, 6)
    return tl


def records(t_start: float, t_stop: float, *, fail_every: int = 0, rate: float = 20.0, e2e: float = 0.1,
            fail_until: float = 0.0) -> list[RequestRecord]:
    out, i, t = [], 0, t_start
    while t < t_stop:
        bad = t < fail_until or (fail_every and i % fail_every == 0)
        out.append(RequestRecord(f"r{i}", 1, t, e2e=e2e, error="http" if bad else None, status=503 if bad else 200,
                                 outcome="failed" if bad else "succeeded"))
        i, t = i + 1, round(t + 1 / rate, 6)
    return out


def test_health_and_first_completion_boundaries() -> None:
    v = recovery_verdict((T_INJ, T_REV), timeline(4.0, 5.0), [], SLA)
    assert v.row("health_back_s").measured == pytest.approx(4.0, abs=0.01) and v.row("health_back_s").ok
    assert v.row("first_completion_s").measured == pytest.approx(5.0, abs=0.01) and v.row("first_completion_s").ok
    late = recovery_verdict((T_INJ, T_REV), timeline(4.0, 5.1), [], SLA)
    assert late.row("first_completion_s").ok is False
    with pytest.raises(SLOViolation) as e:
        late.assert_ok()
    assert "first_completion_s" in str(e.value) and "5.000" in str(e.value) and "100.000-110.000" in str(e.value)
    assert e.value.window == (T_INJ, T_REV)


def test_health_that_never_went_down_cannot_pass() -> None:
    """Real vLLM answers /health 200 with a frozen engine: that is no evidence of recovery."""
    tl = Timeline(clock=lambda: 0.0)
    for i in range(400):
        t = 95.0 + i * 0.1
        tl.sample("health", "status", 200, t=t)
        tl.sample("completion", "ok", not (T_INJ <= t < T_INJ + 3.0), t=t)
    row = recovery_verdict((T_INJ, T_INJ), tl, [], SLA).row("health_back_s")
    assert row.ok is None and row.measured is None and "does not see this fault" in row.detail


def test_health_back_counts_from_when_it_went_down() -> None:
    """Frozen rank: /health 200 for 2 s after the fault, then down until +6 s: back at 6 s, not at once."""
    tl = Timeline(clock=lambda: 0.0)
    for i in range(400):
        t = 95.0 + i * 0.1
        tl.sample("health", "status", 503 if T_INJ + 2.0 <= t < T_INJ + 6.0 else 200, t=t)
    row = recovery_verdict((T_INJ, T_INJ), tl, [], SLA).row("health_back_s")
    assert row.measured == pytest.approx(6.0, abs=0.01) and row.ok is False


def test_health_flapping_is_not_healthy_yet() -> None:
    tl = Timeline()
    for i, st in enumerate([503, 200, 503, 200, 200, 200, 200]):
        tl.sample("health", "status", st, t=T_REV + i)
    assert time_to_health(tl.series("health", "status"), T_REV, confirm=3) == 3.0


def test_no_completion_after_the_fault_fails() -> None:
    v = recovery_verdict((T_INJ, T_REV), timeline(1.0, 999.0), [], SLA)
    assert v.row("first_completion_s").ok is False and v.row("first_completion_s").measured is None


@pytest.mark.parametrize("failed, steady", [(99, True), (100, True), (101, False)])  # 0.99 %, 1 %, 1.01 %
def test_steady_state_error_rate_boundary(failed: int, steady: bool) -> None:
    recs = records(T_REV, T_REV + 10, rate=1000)
    assert len(recs) == 10_000
    for r in recs[::100][:failed] + recs[1::100][: max(0, failed - 100)]:
        r.error, r.outcome = "http", "failed"
    t = time_to_steady(recs, T_REV, window_s=10, error_budget=0.01, p99_limit_s=None)
    assert (t is not None) is steady


def test_steady_state_waits_for_errors_and_latency() -> None:
    recs = records(T_REV, T_REV + 30, fail_until=T_REV + 3, rate=20)
    v = recovery_verdict((T_INJ, T_REV), timeline(1, 1), recs, SLA, steady_window_s=5.0)
    assert v.row("steady_state_s").measured == pytest.approx(3.0, abs=0.3) and v.row("steady_state_s").ok
    slow = recovery_verdict((T_INJ, T_REV), timeline(1, 1), records(T_REV, T_REV + 30, e2e=3.0), SLA,
                            steady_window_s=5.0, p99_limit_s=2.0)
    assert slow.row("steady_state_s").ok is False


def test_fault_error_rate_restarts_and_gpu_memory() -> None:
    recs = records(T_INJ, T_REV, fail_every=2)
    v = recovery_verdict((T_INJ, T_REV), timeline(1, 1, gpu=True), recs, SLA, restarts=1, max_restarts=1,
                         crash=True, fault_error_rate_max=0.4)
    assert v.row("fault_error_rate").measured == pytest.approx(0.5) and v.row("fault_error_rate").ok is False
    assert v.row("restarts").ok is True
    assert v.row("gpu_mem_released_s").measured == pytest.approx(1.5, abs=0.11) and v.row("gpu_mem_released_s").ok
    assert v.row("gpu_mem_retaken_s").ok is True
    slow_release = SLAs(recovery_s=5.0, gpu_memory_release_s=1.0)
    assert recovery_verdict((T_INJ, T_REV), timeline(1, 1, gpu=True), [], slow_release,
                            crash=True).row("gpu_mem_released_s").ok is False


def test_a_crash_without_gpu_samples_says_so_and_no_crash_has_no_gpu_rows() -> None:
    v = recovery_verdict((T_INJ, T_REV), timeline(1, 1), [], SLA, crash=True)
    row = v.row("gpu_mem_released_s")
    assert row.ok is None and row.detail.startswith("no GPU visible")  # said, never silently left out
    assert all(not r.check.startswith("gpu") for r in recovery_verdict((T_INJ, T_REV), timeline(1, 1), [], SLA).rows)


def test_window_backwards_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="window"):
        recovery_verdict((10.0, 5.0), Timeline(), [], SLA)


class _GrowingLoad:
    """A load whose records appear as a fake clock advances: failures until t=fail_until, then a
    request every `gap_s` seconds."""

    def __init__(self, clock, recs: list[RequestRecord]) -> None:
        self.clock, self.recs = clock, recs

    def records(self) -> list[RequestRecord]:
        return [r for r in self.recs if r.t_end <= self.clock()]


def _scenario_on_fake_clock(tmp_path, recs):
    from chaos.env import load as load_env
    from chaos.experiment.run import Run

    now = [T_REV]
    sc = Run(load_env("local", environ={}), "steady", tmp_path, clock=lambda: now[0],
                  sleep=lambda s: now.__setitem__(0, now[0] + s))
    sc.load = _GrowingLoad(lambda: now[0], recs)
    return sc, now


@pytest.mark.parametrize("gap_s, steady_at", [(0.1, 6.0), (2.0, None)])
def test_observe_steady_holds_until_a_window_is_judged_or_the_sla_runs_out(tmp_path, gap_s, steady_at) -> None:
    # sparse traffic to a recovered replica (one request every 2 s: never 5 in a 5 s window) keeps
    # the load running until the SLA's deadline; dense traffic ends the hold once a window is steady
    recs = records(T_REV, T_REV + 60, fail_until=T_REV + 1, rate=1 / gap_s)
    sc, now = _scenario_on_fake_clock(tmp_path, recs)
    from chaos.verify.recovery import steady_seen

    sc.observe_steady(T_REV, at_least_s=3.0, until=T_REV + 30.0,
                      steady=lambda rs: steady_seen(rs, T_REV, 5.0, SLA))
    took = now[0] - T_REV
    if steady_at is None:
        assert took == pytest.approx(30.0, abs=1.01)
    else:  # the first steady window [1, 6) is fully seen at about t=6
        assert 3.0 <= took <= steady_at + 1.01
