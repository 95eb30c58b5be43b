"""Load configuration shared by the runner and the locustfile (which may also run on its own).

The locustfile reads its configuration from the environment:
  CHAOS_LOAD_CONFIG   path of a JSON file with any LoadConfig fields (see below)
  CHAOS_LOAD_OUT_DIR  directory for the per-process record files (overrides `out_dir`)
  CHAOS_LOAD_<FIELD>  any scalar field, e.g. CHAOS_LOAD_MODEL=m, CHAOS_LOAD_MAX_TOKENS=64,
                      CHAOS_LOAD_API=completions; JSON values for dict fields (CHAOS_LOAD_MIX='{"short":1}')
Without any of them it sends chat requests for `sim-model` and writes records to ./chaos-load-records.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.errors import ConfigError
from chaos.load.workloads import DEFAULT_CLASSES, DEFAULT_MIX, WORKLOADS

if TYPE_CHECKING:
    from chaos.env.model import RetryPolicy

ENV_CONFIG = "CHAOS_LOAD_CONFIG"
ENV_OUT_DIR = "CHAOS_LOAD_OUT_DIR"
SHAPES = ("users", "rate", "ramp", "step")


@dataclass
class LoadConfig:
    """Everything a load process needs to know; JSON-serialisable."""

    api: str = "chat"                     # chat | completions
    model: str = "sim-model"
    max_tokens: int = 16
    stream: bool = True
    workload: str = "mix"                 # mix | burst | shared_prefix | special | file
    workload_n: int | None = None         # size of a finite workload (burst / shared_prefix / file)
    prompts_file: str | None = None       # workload file: JSONL of {"prompt": ...} (vllm bench's custom format)
    ignore_eos: bool = False              # vLLM's ignore_eos: every answer is max_tokens long
    mix: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_MIX))
    classes: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_CLASSES))
    seed: int = 0
    out_dir: str = "chaos-load-records"
    timeout_s: float = 60.0               # connect timeout and per-chunk read timeout
    retry: dict[str, Any] | None = None   # RetryPolicy fields; None = no retries
    api_key: str | None = None
    served_by_header: str = "x-served-by"
    shape: str = "users"                  # users | rate | ramp | step
    users: int = 8
    rate_per_s: float = 10.0
    max_users: int = 0                    # concurrency cap for the rate shape (0 = auto)
    duration_s: float = 30.0
    ramp_from: int = 1                    # ramp: users at t=0 -> `users` at duration_s
    step_users: int = 2                   # step: users added per step, up to `users`
    step_s: float = 5.0
    workers: int = 1                      # number of processes sharing the rate (set by the runner)
    flush_s: float = 0.5                  # how often records reach the file
    # request attributes a gateway routes on (gray release: region, business line, user tier): header
    # -> {value: weight}; each logical request draws one value per header and carries it on every attempt
    attributes: dict[str, dict[str, float]] = field(default_factory=dict)
    temperature: float | None = None      # sent when set: 0 makes answers comparable (shadow diff)
    special_share: float = 0.0            # mix: share of prompts headed by a special-character corpus row
    # > 0: greedy, seeded answers (temperature 0, `seed` sent) over a fixed set of this many mix prompts per
    # class, each record keeping its prompt's key and its answer's digest (the answers verdict); 0: off
    answers: int = 0

    def validate(self) -> LoadConfig:
        if self.api not in ("chat", "completions"):
            raise ConfigError(f"load config 'api': expected chat or completions, got {self.api!r}")
        if self.shape not in SHAPES:
            raise ConfigError(f"load config 'shape': expected one of {', '.join(SHAPES)}, got {self.shape!r}")
        if self.workload not in WORKLOADS:
            raise ConfigError(f"load config 'workload': expected one of {', '.join(WORKLOADS)}, got {self.workload!r}")
        for name in ("users", "max_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(f"load config {name!r}: expected >= 1, got {getattr(self, name)}")
        for name in ("rate_per_s", "duration_s", "timeout_s", "step_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"load config {name!r}: expected > 0, got {getattr(self, name)}")
        if self.workload == "file" and not self.prompts_file:
            raise ConfigError("load config 'prompts_file': the file workload needs a JSONL file of {\"prompt\": ...}")
        if self.retry is not None:
            self.retry_policy()
        for header, values in self.attributes.items():
            if not isinstance(values, dict) or not values or any(
                    not isinstance(w, (int, float)) or w < 0 for w in values.values()) or sum(values.values()) <= 0:
                raise ConfigError(f"load config 'attributes.{header}': expected {{value: weight}} with "
                                  f"non-negative weights and a positive sum, got {values!r}")
        if not 0 <= self.special_share <= 1:
            raise ConfigError(f"load config 'special_share': expected 0-1, got {self.special_share!r}")
        if not isinstance(self.answers, int) or self.answers < 0:
            raise ConfigError(f"load config 'answers': expected a prompt-set size >= 0, got {self.answers!r}")
        if self.answers and self.temperature not in (None, 0):
            raise ConfigError(f"load config 'temperature': answers are compared greedy (0), got {self.temperature!r}")
        if self.temperature is not None and not 0 <= self.temperature <= 2:
            raise ConfigError(f"load config 'temperature': expected 0-2, got {self.temperature!r}")
        return self

    def retry_policy(self) -> RetryPolicy | None:
        if self.retry is None:
            return None
        from pydantic import ValidationError

        from chaos.env.model import RetryPolicy

        try:
            return RetryPolicy(**self.retry)
        except ValidationError as e:
            first = e.errors()[0]
            raise ConfigError(f"load config 'retry.{'.'.join(map(str, first['loc']))}': {first['msg']}") from None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    def save(self, path: str | Path) -> Path:
        Path(path).write_text(self.to_json(), encoding="utf-8")
        return Path(path)

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "load config") -> LoadConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(f"{where}: unknown field(s) {unknown}")
        try:
            return cls(**d).validate()
        except TypeError as e:
            raise ConfigError(f"{where}: {e}") from None


def _coerce(raw: str, current: Any, name: str) -> Any:
    try:
        if isinstance(current, bool):
            return raw.strip().lower() in ("1", "true", "yes", "on")
        if isinstance(current, int):
            return int(raw)
        if isinstance(current, float):
            return float(raw)
        if isinstance(current, (dict, list)) or current is None:
            try:
                return json.loads(raw)
            except ValueError:
                return raw
        return raw
    except ValueError:
        raise ConfigError(f"environment variable CHAOS_LOAD_{name.upper()}={raw!r}: expected {type(current).__name__}") from None


def from_environ(environ: dict[str, str] | None = None) -> LoadConfig:
    """The configuration the locustfile runs with (see the module docstring)."""
    env = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    path = env.get(ENV_CONFIG)
    if path:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ConfigError(f"{ENV_CONFIG}={path}: cannot read JSON load config: {e}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{ENV_CONFIG}={path}: expected a JSON object")
    cfg = LoadConfig.from_dict(data, where=path or "load config")
    for f in fields(LoadConfig):
        raw = env.get(f"CHAOS_LOAD_{f.name.upper()}")
        if raw is not None:
            setattr(cfg, f.name, _coerce(raw, getattr(cfg, f.name), f.name))
    if env.get(ENV_OUT_DIR):
        cfg.out_dir = env[ENV_OUT_DIR]
    return cfg.validate()
