"""The `monitoring:` section: the team's Prometheus and Alertmanager (or embedded ones), its alert
rule files, and which alerts each fault must raise (fire within N s, clear within M s)."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from chaos.env.addresses import HttpUrl

# the recovery suite's faults (chaos.env.model.RecoveryFault) and the breaker suite's scenarios (sized by
# chaos.verify.breaker_sizes): the names an alert expectation may key on
RECOVERY_FAULTS = ("gpu-driver-reset", "crash-sigkill", "engine-death-exit0", "nccl-rank-kill", "nccl-rank-freeze",
                   "nccl-rank-link-cut", "nccl-timeout-allreduce-hang")
BREAKER_SCENARIOS = ("errors-below-degrade", "errors-degrade", "errors-rollback", "latency-below-degrade",
                     "latency-degrade", "oom-burst", "leak-trend")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Endpoint(_Strict):
    url: HttpUrl | None = Field(None, description="the team's server (staging), e.g. http://prometheus:9090")
    embedded: bool = Field(False, description="start a real one from its Debian package on a free port")

    @model_validator(mode="after")
    def _one(self) -> _Endpoint:
        if bool(self.url) == self.embedded:
            raise ValueError("expected exactly one of 'url' or 'embedded: true'")
        return self


class PrometheusSettings(_Endpoint):
    """Where alerts are evaluated: the team's Prometheus, or an embedded one the harness starts."""

    scrape_interval_s: float = Field(1.0, gt=0, description="embedded: how often each /metrics page is scraped")
    evaluation_interval_s: float = Field(1.0, gt=0, description="embedded: how often the rules are evaluated")


class AlertmanagerSettings(_Endpoint):
    """Where alerts become pages: the team's Alertmanager, or an embedded one routing to the harness's
    webhook receiver (127.0.0.1)."""

    group_wait_s: float = Field(0.0, ge=0, description="embedded: wait before the first notification of a group")
    group_interval_s: float = Field(1.0, gt=0, description="embedded: wait before notifying a group's changes")


class AlertExpectation(_Strict):
    """Alerts one fault must raise: each fires within `fire_within_s` of the fault taking effect and
    clears within `clear_within_s` of recovery; `allow` may fire too without being a false page."""

    fire: list[str] = Field(..., min_length=1, description="alert names that must fire")
    allow: list[str] = Field([], description="alert names that may also fire (e.g. a lower tier)")
    fire_within_s: float = Field(60.0, gt=0)
    clear_within_s: float = Field(120.0, gt=0)


class Monitoring(_Strict):
    """The team's monitoring, judged by the harness: did the fault page someone, how fast, and did it clear."""

    prometheus: PrometheusSettings
    alertmanager: AlertmanagerSettings | None = None
    rule_files: list[str] = Field([], description="Prometheus rule files (relative: to the environment file's folder)")
    expect: dict[str, AlertExpectation] = Field(
        {}, description="fault kind or scenario name (gpu-driver-reset, errors-rollback, ...) -> its alerts")
    baseline_silent: bool = Field(True, description="no alert may fire during a no-fault baseline (a false page)")

    @model_validator(mode="after")
    def _embedded_rules(self) -> Monitoring:
        if self.prometheus.embedded and not self.rule_files:
            raise ValueError("an embedded prometheus needs 'rule_files' (the alerts it evaluates)")
        if self.alertmanager and self.alertmanager.embedded and not self.prometheus.embedded:
            raise ValueError("an embedded alertmanager needs an embedded prometheus (yours would not send to it)")
        known = [*RECOVERY_FAULTS, *BREAKER_SCENARIOS]
        for key in self.expect:
            if key not in known:
                raise ValueError(f"expect: {key!r} is no fault kind or scenario (expected one of {', '.join(known)})")
        return self

    def expectation(self, fault: str | None) -> AlertExpectation | None:
        """What `fault` must raise (None: nothing is expected of it, or no fault at all)."""
        return self.expect.get(fault) if fault else None
