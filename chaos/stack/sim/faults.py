"""Fault modes of the simulator: by flag (`--fault MODE[:ARG]`) or `POST /admin/faults`.

Flag form: `--fault MODE`, `--fault MODE:VALUE` (VALUE sets the mode's first parameter) or
`--fault MODE:key=value,key=value`. Admin form: JSON `{"mode": MODE, key: value, ...}`.
Revert: `DELETE /admin/faults/MODE` or `{"mode": MODE, "revert": true}`.

| mode | parameters (default) | effect |
|---|---|---|
| crash | after (0 s) | immediate non-zero exit (SIGKILL to self and ranks), as a GPU Xid kill |
| engine-death | after (0 s) | "EngineCore encountered a fatal error." -> in-flight fail, /health 503, exit 0 |
| oom | after (0 s) | CUDA out-of-memory log, then the engine-death path |
| hang | after (0 s) | engine stops stepping; /health stays 200; requests hang; revert resumes |
| decode-stall | after (0 s) | the loop and /health live and prefill runs (a request gets its first token), but no decode step is scheduled: running requests stay running, `vllm:generation_tokens_total` grows only by new requests' first tokens; revert resumes |
| error-rate | fraction (1.0), status (500), spread (1) | that fraction of new requests fail at once with status; spread=1 spaces the failures evenly (every 1/fraction-th request), spread=0 draws each at random |
| oom-error | fraction (1.0), spread (1) | that fraction of requests fail with 500 and torch's "CUDA out of memory" message; the engine lives on (vLLM with VLLM_KEEP_ALIVE_ON_ENGINE_DEATH=1 answers its OOM that way) |
| slow | factor (2.0) | step time x factor (an `instant` step counts as 1 ms x time-scale) |
| stall | after_tokens (4), seconds (5.0), fraction (1.0) | a stream pauses that long after N tokens |
| truncate | after_tokens (4), fraction (1.0) | after N tokens the connection closes without [DONE] |
| error-chunk | after_tokens (4), fraction (1.0) | after N tokens: `data: {"error": ...}` then [DONE] |
| tokenizer-crash | threshold (15) | a prompt with > threshold emoji, not NFC-normalized, kills the engine |
| leak | bytes_per_request (1048576) | each request keeps that much touched memory (RSS grows) |
| step-error | none | the engine's first step raises a RuntimeError (vLLM's traceback shape): the engine dies at its first request, as a model the engine cannot run does |
| answer-drift | fraction (1.0) | that fraction of requests get another answer than the same prompt gets elsewhere (a new model's regression, for shadow comparison) |

`after` delays the death modes (seconds, real time). Non-streaming requests: truncate closes the
connection without a response; error-chunk answers 500.
"""
from __future__ import annotations

import random
from typing import Any

from chaos.errors import ConfigError

_F, _I = float, int
SPECS: dict[str, dict[str, tuple[type, float, float, float]]] = {
    # name: {param: (type, default, min, max)}
    "crash": {"after": (_F, 0.0, 0.0, 86400.0)},
    "engine-death": {"after": (_F, 0.0, 0.0, 86400.0)},
    "oom": {"after": (_F, 0.0, 0.0, 86400.0)},
    "hang": {"after": (_F, 0.0, 0.0, 86400.0)},
    "decode-stall": {"after": (_F, 0.0, 0.0, 86400.0)},
    "error-rate": {"fraction": (_F, 1.0, 0.0, 1.0), "status": (_I, 500, 400, 599), "spread": (_I, 1, 0, 1)},
    "oom-error": {"fraction": (_F, 1.0, 0.0, 1.0), "spread": (_I, 1, 0, 1)},
    "slow": {"factor": (_F, 2.0, 0.001, 1e6)},
    "stall": {"after_tokens": (_I, 4, 0, 1 << 20), "seconds": (_F, 5.0, 0.0, 86400.0),
              "fraction": (_F, 1.0, 0.0, 1.0)},
    "truncate": {"after_tokens": (_I, 4, 0, 1 << 20), "fraction": (_F, 1.0, 0.0, 1.0)},
    "error-chunk": {"after_tokens": (_I, 4, 0, 1 << 20), "fraction": (_F, 1.0, 0.0, 1.0)},
    "tokenizer-crash": {"threshold": (_I, 15, 0, 1 << 20)},
    "leak": {"bytes_per_request": (_I, 1 << 20, 0, 1 << 30)},
    "answer-drift": {"fraction": (_F, 1.0, 0.0, 1.0)},
    "step-error": {},
}
# what `step-error` logs: vLLM's engine core dying at a step, with the seed incident's exception
STEP_ERROR_TRACE = (
    "EngineCore encountered a fatal error.\n"
    "Traceback (most recent call last):\n"
    '  File "vllm/v1/engine/core.py", line 701, in run_engine_core\n'
    "    engine_core.run_busy_loop()\n"
    '  File "vllm/v1/attention/backends/cpu_attn.py", line 88, in forward\n'
    '    raise RuntimeError(f"Unsupported CPU attention configuration: {cfg}")\n'
    "RuntimeError: Unsupported CPU attention configuration: head_dim=64 isa=0 (simulator fault step-error)")
DEATH_MODES = ("crash", "engine-death", "oom")


def validate(mode: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Checked parameters for `mode` with defaults filled in; ConfigError names what is wrong."""
    if not isinstance(mode, str) or mode not in SPECS:
        raise ConfigError(f"fault mode {mode!r} is unknown; expected one of {', '.join(SPECS)}")
    spec = SPECS[mode]
    unknown = set(params) - set(spec)
    if unknown:
        raise ConfigError(f"fault {mode}: unknown parameter(s) {', '.join(sorted(unknown))}; "
                          f"expected {', '.join(spec) or 'none'}")
    out: dict[str, Any] = {}
    for name, (typ, default, lo, hi) in spec.items():
        val = params.get(name, default)
        try:
            if isinstance(val, bool) or val is None:
                raise ValueError
            val = typ(val)
            if typ is int and isinstance(params.get(name), float) and params[name] != val:
                raise ValueError
        except (TypeError, ValueError):
            raise ConfigError(f"fault {mode}: {name} must be a {typ.__name__}, got {val!r}") from None
        if not lo <= val <= hi:
            raise ConfigError(f"fault {mode}: {name}={val} is outside [{lo}, {hi}]")
        out[name] = val
    return out


def parse_flag(text: str) -> tuple[str, dict[str, Any]]:
    """Parse `MODE`, `MODE:VALUE` or `MODE:k=v,k=v` into (mode, checked params)."""
    mode, _, arg = text.partition(":")
    mode = mode.strip()
    if mode not in SPECS:
        raise ConfigError(f"--fault: unknown mode {mode!r}; expected one of {', '.join(SPECS)}")
    params: dict[str, Any] = {}
    if arg:
        if "=" in arg:
            for part in arg.split(","):
                k, sep, v = part.partition("=")
                if not sep:
                    raise ConfigError(f"--fault {mode}: expected key=value, got {part!r}")
                params[k.strip()] = v.strip()
        elif SPECS[mode]:
            params[next(iter(SPECS[mode]))] = arg.strip()
    try:
        return mode, validate(mode, params)
    except ConfigError as e:
        raise ConfigError(f"--fault: {e}") from None


class FaultSet:
    """The active faults and a seeded coin for the fractional ones."""

    def __init__(self, seed: int = 0) -> None:
        self.active: dict[str, dict[str, Any]] = {}
        self._rng = random.Random(seed ^ 0x5EED)
        self._acc: dict[str, float] = {}

    def set(self, mode: str, params: dict[str, Any]) -> None:
        self.active[mode] = params
        self._acc.pop(mode, None)

    def clear(self, mode: str) -> bool:
        self._acc.pop(mode, None)
        return self.active.pop(mode, None) is not None

    def hit(self, mode: str) -> bool:
        """Whether this request is hit by a fractional fault: evenly spaced (spread=1) or random.

        Even spacing makes "1.5 % of requests" mean exactly that over any window of a few hundred
        requests, so a breaker's tiers can be told apart without thousands of calls."""
        p = self.active.get(mode)
        if p is None:
            return False
        fraction = p["fraction"]
        if not p.get("spread", 0):
            return self.coin(fraction)
        acc = self._acc.get(mode, 0.0) + fraction
        hit: bool = acc >= 1.0 - 1e-9
        self._acc[mode] = acc - 1.0 if hit else acc
        return hit

    def get(self, mode: str) -> dict[str, Any] | None:
        return self.active.get(mode)

    def coin(self, fraction: float) -> bool:
        return fraction >= 1.0 or self._rng.random() < fraction

    def listing(self) -> list[dict[str, Any]]:
        return [{"mode": m, **p} for m, p in self.active.items()]
