"""Fault schedules: several faults at chosen moments, overlapping where they may, drawn from a seeded
generator over what an environment allows (issue 18's nemesis, in Jepsen's sense).

    environment: local
    seed: 7
    horizon_s: 60
    faults:
      - {kind: jitter, proxy: client, start_s: 4.0, duration_s: 12.5}
      - {kind: restart, target: replica-a, start_s: 9.0, duration_s: 0}
      - {kind: http-error, target: replica-c, start_s: 20.0, duration_s: 8.0, status: 500, fraction: 0.05}

A fault names `kind` as `chaos fault inject` does, where it acts (`target` or `proxy`), when it
starts and how long it holds (0: an instant fault such as a restart), and its own parameters. A
schedule file is validated like an environment file: a mistake is one line naming file:line and the
field. Its hash (over the faults and the horizon, not the seed) names it in reports and file names.

The generator keeps the blast radius: a destructive fault (restart, kill, rank freeze) never
overlaps another destructive one on a different stable replica, so at most one stable replica is
down at a time; a protected environment gets no destructive fault unless allowed.
"""
from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from chaos.errors import ConfigError
from chaos.experiment.plan import parse_yaml_model
from chaos.faults.params import as_value_error

DESTRUCTIVE = ("restart", "kill", "rank-freeze")
INSTANT = ("restart", "kill")
# what the generator draws, with the parameters it varies: (kind, where, {param: (low, high)})
MENU: tuple[tuple[str, str, dict[str, tuple[float, float]]], ...] = (
    ("restart", "target", {}),
    ("kill", "target", {}),
    ("rank-freeze", "rank-target", {}),
    ("http-error", "fault-proxy", {"fraction": (0.01, 0.2)}),
    ("jitter", "proxy", {"latency": (300, 2650), "jitter": (0, 2350)}),
    ("reset-peer", "proxy", {"toxicity": (0.05, 0.5)}),
)


class ScheduledFault(BaseModel):
    """One fault of a schedule; fields other than these are the fault's own parameters."""

    model_config = ConfigDict(extra="allow")
    kind: str
    target: str | None = None
    proxy: str | None = None
    start_s: float = Field(..., ge=0)
    duration_s: float = Field(..., ge=0, description="0: an instant fault (restart, kill)")

    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s

    @model_validator(mode="after")
    def _where(self) -> ScheduledFault:
        as_value_error(self.kind, self.params())
        if not self.target and not self.proxy:
            raise ValueError(f"fault {self.kind}: name a target or a proxy")
        return self

    def describe(self) -> str:
        where = self.target or self.proxy
        extra = "".join(f" {k}={v}" for k, v in sorted(self.params().items()))
        return f"{self.kind}@{where} t+{self.start_s:g}s for {self.duration_s:g}s{extra}"


class Schedule(BaseModel):
    """Faults over `horizon_s` seconds of load; `breaks` says which verdict it broke, once shrunk."""

    model_config = ConfigDict(extra="forbid")
    environment: str | None = None
    seed: int | None = None
    horizon_s: float = Field(..., gt=0)
    faults: list[ScheduledFault] = Field(..., min_length=1)
    breaks: str | None = None

    @field_validator("faults")
    @classmethod
    def _inside(cls, faults: list[ScheduledFault], info: ValidationInfo) -> list[ScheduledFault]:
        horizon = info.data.get("horizon_s")
        for i, f in enumerate(faults):
            if horizon is not None and f.end_s > horizon:
                raise ValueError(f"faults[{i}] ({f.kind}) ends at {f.end_s:g} s, after horizon_s {horizon:g}")
        return faults

    def key(self) -> str:
        """A short hash of what the schedule does (its faults and horizon; not its seed or verdict)."""
        what = {"horizon_s": self.horizon_s, "faults": [f.model_dump() for f in self.faults]}
        return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:12]

    def to_yaml(self) -> str:
        doc = self.model_dump(exclude_none=True)
        return yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=120)

    def write(self, directory: str | Path) -> Path:
        path = Path(directory) / f"schedule-{self.key()}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_yaml(), encoding="utf-8")
        return path


def load_schedule(path: str | Path) -> Schedule:
    """Read and validate an explore schedule file (YAML); a bad one is a one-line ConfigError."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: cannot read the schedule: {getattr(e, 'strerror', None) or e}") from None
    return parse_yaml_model(text, p, Schedule, "a mapping with 'horizon_s' and 'faults'")


def _places(env: Any, where: str) -> list[str]:
    if where == "target":
        return [t.name for t in env.targets]
    if where == "rank-target":
        return [t.name for t in env.targets if t.tp_size > 1]
    if where == "fault-proxy":
        return [t.name for t in env.targets if env.fault_proxy_of(t.name) is not None]
    # a rank link is left out: jitter past the collective timeout kills the engine, a destructive fault
    # that would slip past the blast radius (rank-freeze is the rank fault the menu draws)
    links = {p for t in env.targets for p in t.rank_proxies}
    return [p.name for p in env.toxiproxy.proxies if p.name not in links] if env.toxiproxy is not None else []


def _stable(env: Any, name: str | None) -> bool:
    return any(t.name == name and t.pool == "stable" for t in env.targets)


def _down_s(f: ScheduledFault, env: Any) -> float:
    """How long a destructive fault keeps its replica down: its duration, and at least its restart.
    The simulator restarts in a few seconds; any other server (real vLLM: 60-165 s here) is given its
    environment's cold start, or two restarts 7 s apart put both stable replicas down at once."""
    backend = next((t.backend for t in env.targets if t.name == f.target), "other")
    return max(f.duration_s, 5.0 if backend == "simulator" else float(env.slas.cold_start_s))


def _clashes(f: ScheduledFault, chosen: list[ScheduledFault], env: Any) -> bool:
    """True when `f` would put a second stable replica down while another is (the blast radius)."""
    if f.kind not in DESTRUCTIVE or not _stable(env, f.target):
        return False
    hold = _down_s(f, env)
    for g in chosen:
        if g.kind in DESTRUCTIVE and _stable(env, g.target) and g.target != f.target:
            if f.start_s < g.start_s + _down_s(g, env) and g.start_s < f.start_s + hold:
                return True
    return False


MenuItem = tuple[str, str, dict[str, tuple[float, float]]]


def menu_for(env: Any, allow_destructive: bool, kinds: tuple[str, ...] | None = None) -> list[MenuItem]:
    """The fault kinds the environment has a place for (and allows), with their parameter ranges."""
    menu = [(k, w, p) for k, w, p in MENU if (kinds is None or k in kinds) and _places(env, w)
            and (k not in DESTRUCTIVE or allow_destructive or not env.safety.protected)]
    if not menu:
        raise ConfigError(f"environment {env.name}: none of the fault kinds {[k for k, _, _ in MENU]} has a place here")
    return menu


def draw_fault(env: Any, rng: random.Random, menu: list[MenuItem], *,
               start: tuple[float, float], horizon_s: float, chosen: list[ScheduledFault]) -> ScheduledFault | None:
    """One fault from the menu starting within `start` and ending by the horizon, within the blast
    radius of those `chosen` already (None when ten draws all broke it)."""
    for _attempt in range(10):  # a draw that breaks the blast radius is drawn again
        kind, where, ranges = rng.choice(menu)
        place = rng.choice(_places(env, where))
        at = round(rng.uniform(*start), 1)
        duration = 0.0 if kind in INSTANT else round(rng.uniform(min(2.0, horizon_s - at), min(30.0, horizon_s - at)), 1)
        params: dict[str, Any] = {}
        for name, (lo, hi) in ranges.items():
            params[name] = round(rng.uniform(lo, hi), 3) if isinstance(lo, float) else int(rng.uniform(lo, hi))
        f = ScheduledFault(kind=kind, start_s=at, duration_s=duration,
                           **({"proxy": place} if where == "proxy" else {"target": place}), **params)
        if not _clashes(f, chosen, env):
            return f
    return None


def generate(env: Any, seed: int, *, max_faults: int = 3, horizon_s: float = 60.0, allow_destructive: bool = False,
             kinds: tuple[str, ...] | None = None) -> Schedule:
    """A random schedule for `env`, the same for the same seed and environment."""
    rng = random.Random(seed)
    menu = menu_for(env, allow_destructive, kinds)
    chosen: list[ScheduledFault] = []
    for _ in range(rng.randint(1, max_faults)):
        f = draw_fault(env, rng, menu, start=(0, horizon_s * 0.6), horizon_s=horizon_s, chosen=chosen)
        if f is not None:
            chosen.append(f)
    chosen.sort(key=lambda f: f.start_s)
    return Schedule(environment=env.name, seed=seed, horizon_s=horizon_s, faults=chosen)
