"""Game-day plans: a YAML list of experiments, validated like environment files (one line naming
file:line and the field), turned into Experiments against an environment.

    name: basic game day
    hypothesis: {error_share_below: 0.02, p99_below_s: 5.0}    # the steady state, for every experiment
    window_s: 10
    experiments:
      - name: canary answers 4 % 500s
        fault: {kind: http-error, target: replica-c, status: 500, fraction: 0.04}
        hold_s: 20
        until: {recovered_within_s: 60}
        alerts: {fire: [LLMErrorRateDegrade], fire_within_s: 30, clear_within_s: 60}

Fault kinds and their fields are `chaos fault inject`'s: an HTTP fault names a `target` (its fault
proxy) or a `proxy`, a network fault a Toxiproxy `proxy`, a target fault a `target`; every other
field is the fault's own parameter (status, fraction, latency, ...), checked by name, type and range
(chaos.faults.params) when the plan is read. `alerts` are the team's alerts the fault must raise
(chaos.experiment.alerts: judged where the environment has a `monitoring:` section); an experiment
without a fault is a no-fault baseline, where any alert that fires is a false page.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from chaos.checks import Check, Hypothesis, error_share_below, goodput_share_above, p99_below_s
from chaos.env import schema_errors
from chaos.env.monitoring import AlertExpectation
from chaos.errors import ConfigError
from chaos.experiment.runner import AbortLimits, Experiment, recovered
from chaos.faults.params import as_value_error


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PlanHypothesis(_Strict):
    """The steady state each experiment must show before its fault and again after it; each key is the
    chaos.checks check of that name, a failure counting against every one of them."""

    error_share_below: float | None = Field(None, ge=0, le=1, description="share of final requests that failed")
    p99_below_s: float | None = Field(None, gt=0, description="e2e P99, a failure counting as a miss")
    ttft_p99_below_s: float | None = Field(None, gt=0, description="TTFT P99, a failure counting as a miss")
    goodput_share_above: float | None = Field(None, ge=0, le=1,
                                              description="share of requests that succeeded within p99_below_s")
    min_requests: int = Field(5, ge=1)

    def build(self) -> Hypothesis:
        n = self.min_requests
        checks: list[Check] = []
        if self.error_share_below is not None:
            checks.append(error_share_below(self.error_share_below, min_requests=n))
        if self.p99_below_s is not None:
            checks.append(p99_below_s(self.p99_below_s, min_requests=n))
        if self.ttft_p99_below_s is not None:
            checks.append(p99_below_s(self.ttft_p99_below_s, metric="ttft", min_requests=n))
        if self.goodput_share_above is not None:
            checks.append(goodput_share_above(self.goodput_share_above, e2e_s=self.p99_below_s, min_requests=n))
        return Hypothesis(checks)


class PlanFault(BaseModel):
    """One fault: `kind` (as `chaos fault inject`), where (`target` / `proxy`), and its parameters."""

    model_config = ConfigDict(extra="allow")
    kind: str
    target: str | None = None
    proxy: str | None = None

    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    @model_validator(mode="after")
    def _known(self) -> PlanFault:
        as_value_error(self.kind, self.params())
        return self


class Until(_Strict):
    recovered_within_s: float = Field(..., gt=0)


class PlanRelease(_Strict):
    """A gray-release stage on the reference gateway: the canary's weight, the shadow share, and the
    request attributes (by header) it may serve; the release before it is restored at the end."""

    canary_weight: float = Field(..., ge=0, le=1)
    mirror: float = Field(0.0, ge=0, le=1, description="share of stable-served requests copied to the canary")
    admit: dict[str, list[str]] | None = None


class PlanGate(_Strict):
    """What a release stage must show before the next one starts (chaos.verify.release); a stage
    that fails its gate is rolled back and ends the plan."""

    max_diff_score: float = Field(0.01, gt=0, le=1)
    max_error_rate_delta: float = Field(0.01, ge=0, le=1)
    max_p99_ratio: float = Field(1.5, ge=1)
    p99_slack_s: float = Field(0.25, ge=0, description="added to the ratio's limit: sub-second P99s are scheduler noise")
    min_pairs: int = Field(50, ge=1, description="shadow pairs (shadow stage) or canary answers (live stage)")


class PlanExperiment(_Strict):
    """One experiment of the plan: a fault, or a release stage with its gate."""

    name: str = Field(..., min_length=1)
    fault: PlanFault | None = None
    release: PlanRelease | None = None
    gate: PlanGate | None = None
    hold_s: float = Field(30.0, gt=0)
    until: Until | None = None
    hypothesis: PlanHypothesis | None = None
    window_s: float | None = Field(None, gt=0)
    load: dict[str, Any] = Field(default_factory=dict, description="overrides of the environment's load profile")
    alerts: AlertExpectation | None = Field(None, description="the alerts the fault must fire within fire_within_s "
                                                              "and clear within clear_within_s of its revert")

    @model_validator(mode="after")
    def _one_method(self) -> PlanExperiment:
        if self.fault is not None and self.release is not None:
            raise ValueError("give a fault or a release stage, not both")
        if self.alerts is not None and self.fault is None:
            raise ValueError("alerts: an experiment without a fault is a no-fault baseline, where no alert may fire")
        if self.gate is not None and self.release is None:
            raise ValueError("a gate judges a release stage: give `release` too")
        return self


class Plan(_Strict):
    """A game day: experiments run in order; an ABORTED or STOPPED one ends the plan."""

    name: str = Field(..., min_length=1)
    description: str = ""
    hypothesis: PlanHypothesis = PlanHypothesis(error_share_below=0.05)
    window_s: float = Field(10.0, gt=0)
    load: dict[str, Any] = Field(default_factory=dict)
    experiments: list[PlanExperiment] = Field(..., min_length=1)


M = TypeVar("M", bound=BaseModel)


def parse_plan(text: str, source: str | Path) -> Plan:
    """A validated Plan; every failure is one ConfigError line naming file:line and the field."""
    return parse_yaml_model(text, source, Plan, "a mapping with 'name' and 'experiments'")


def parse_yaml_model(text: str, source: str | Path, model: type[M], expected: str) -> M:
    """`text` validated as `model`; every failure is one ConfigError line naming file:line and the
    field (plans, fault schedules: anything a person writes by hand)."""
    path = Path(source)
    node, raw = schema_errors.compose(text, path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected {expected}, found {'nothing' if raw is None else type(raw).__name__}")
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        schema_errors.raise_for(path, node, raw, e)


def load_plan(path: str | Path) -> Plan:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: cannot read the game-day plan: {getattr(e, 'strerror', None) or e}") from None
    return parse_plan(text, p)


def experiments(plan: Plan, env: Any, *, make_fault: Callable[[PlanFault], Any],
                make_load: Callable[[dict[str, Any], float, str], Any], path: str | Path = "plan",
                make_release: Callable[[PlanRelease], Any] | None = None,
                make_gate: Callable[[PlanExperiment, float], list[Callable[..., Any]]] | None = None) -> list[Experiment]:
    """The plan's Experiments against `env`; `make_fault` builds a fault (a ConfigError names the
    experiment), `make_load(overrides, seconds, name)` starts the load of one experiment,
    `make_release` a release stage and `make_gate(experiment, window_s)` its gate's verdicts."""
    out = []
    for i, x in enumerate(plan.experiments):
        window = x.window_s or plan.window_s
        verdicts: list[Callable[..., Any]] = []
        try:
            if x.release is not None:
                if make_release is None:
                    raise ConfigError("release stages are not supported here")
                fault = make_release(x.release)
                verdicts = make_gate(x, window) if (x.gate is not None and make_gate is not None) else []
            else:
                fault = make_fault(x.fault) if x.fault is not None else None
        except ConfigError as e:
            what = "release" if x.release is not None else "fault"
            raise ConfigError(f"{path}: experiments[{i}] ({x.name}): {what}: {e}") from None
        seconds = window + x.hold_s + (x.until.recovered_within_s if x.until else window) + 30.0
        overrides = {**plan.load, **x.load}
        out.append(Experiment(
            x.name, fault=fault, hold_s=x.hold_s, hypothesis=(x.hypothesis or plan.hypothesis).build(),
            window_s=window, until=recovered(x.until.recovered_within_s) if x.until else None,
            abort=AbortLimits.from_env(env, window_s=window), verdicts=verdicts,
            load=_starter(make_load, overrides, seconds, x.name)))
    return out


def _starter(make_load: Callable[[dict[str, Any], float, str], Any], overrides: dict[str, Any], seconds: float,
             name: str) -> Callable[[], Any]:
    """The experiment's load, started when its load phase begins (bound now: the loop moves on)."""
    return lambda: make_load(overrides, seconds, name)
