"""Every fault kind's parameters, by name, type and range, checked in one place before anything acts:
`chaos fault inject --param`, game-day plans and explore schedules all go through `check`.

    check("kill", {"signal": "KILL"})          -> {"sig": Signals.SIGKILL}
    check("http-error", {"statu": 500})        -> ConfigError: fault http-error: unknown parameter 'statu'
                                                  (did you mean status?); it takes status, retry_after, ...

The ranges are what the fault's backend accepts (the fault proxy's rule validation, Toxiproxy's
attributes), so a value that passes here is not refused halfway through an inject.
"""
from __future__ import annotations

import difflib
import math
import signal as _signal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chaos.errors import ConfigError


def _shown(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


class Integer:
    """A whole number within [lo, hi] (a float without a fraction counts: YAML's 500.0)."""

    def __init__(self, lo: int = 0, hi: int | None = None) -> None:
        self.lo, self.hi = lo, hi
        self.want = f"an integer in [{lo}, {hi}]" if hi is not None else f"an integer >= {lo}"
        self.sample = lo

    def __call__(self, v: Any) -> int:
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or v < self.lo or (self.hi is not None and v > self.hi):
            raise ValueError(self.want)
        return v


class Number:
    """A real number within its bounds (`above`: strictly greater than it)."""

    def __init__(self, lo: float | None = 0.0, hi: float | None = None, *, above: float | None = None) -> None:
        self.lo, self.hi, self.above = lo, hi, above
        if above is not None:
            self.want = f"a number > {above:g}"
        elif hi is not None:
            self.want = f"a number in [{lo:g}, {hi:g}]"
        else:
            self.want = f"a number >= {lo:g}" if lo is not None else "a number"
        self.sample = hi if hi is not None else (above + 1 if above is not None else (lo or 0.0) + 1)

    def __call__(self, v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(self.want)
        if (self.lo is not None and v < self.lo) or (self.hi is not None and v > self.hi) or \
                (self.above is not None and v <= self.above):
            raise ValueError(self.want)
        return float(v)


class Boolean:
    """true or false."""

    want, sample = "true or false", True

    def __call__(self, v: Any) -> bool:
        if not isinstance(v, bool):
            raise ValueError(self.want)
        return v


class Text:
    """A non-empty string on one line (it may end up in a header or a rule name)."""

    want, sample = "a non-empty string", "x"

    def __init__(self, *, numbers: bool = False) -> None:
        self.numbers = numbers  # Retry-After: 1 and "1" are the same header
        if numbers:
            self.want = "a string or a number"

    def __call__(self, v: Any) -> str:
        if self.numbers and isinstance(v, (int, float)) and not isinstance(v, bool):
            v = f"{v:g}"
        if not isinstance(v, str) or not v or any(c in v for c in "\r\n\x00"):
            raise ValueError(self.want)
        return v


class Choice:
    """One of a few words."""

    def __init__(self, *words: str) -> None:
        self.words = words
        self.want, self.sample = f"one of {', '.join(words)}", words[0]

    def __call__(self, v: Any) -> str:
        if v not in self.words:
            raise ValueError(self.want)
        return str(v)


class Signal:
    """A signal by name or number: KILL, SIGKILL, kill and 9 are all SIGKILL."""

    want, sample = "a signal name or number (KILL, SIGKILL, TERM, 9, ...)", "KILL"

    def __call__(self, v: Any) -> _signal.Signals:
        if isinstance(v, str) and v.strip().isdigit():
            v = int(v)
        try:
            if isinstance(v, int) and not isinstance(v, bool):
                return _signal.Signals(v)
            if isinstance(v, str):
                name = v.strip().upper()
                return _signal.Signals[name if name.startswith("SIG") else f"SIG{name}"]
        except (KeyError, ValueError):
            pass
        raise ValueError(self.want)


class TextList:
    """A non-empty list of strings (header names)."""

    want, sample = "a list of strings", ["x-drop-me"]

    def __call__(self, v: Any) -> list[str]:
        if not isinstance(v, list) or not v or not all(isinstance(s, str) and s for s in v):
            raise ValueError(self.want)
        return list(v)


class TextMap:
    """A mapping of strings to strings (header name -> value; the match's path/model/header)."""

    def __init__(self, keys: tuple[str, ...] = (), want: str = "a mapping of strings to strings") -> None:
        self.keys, self.want = keys, want
        self.sample: dict[str, Any] = {keys[0]: "/v1/*"} if keys else {"x-set-me": "1"}

    def __call__(self, v: Any) -> dict[str, Any]:
        if not isinstance(v, dict) or (self.keys and not set(v) <= set(self.keys)):
            raise ValueError(self.want)
        for k, val in v.items():
            if self.keys and k == "header":  # the match's header: name -> value
                ok = isinstance(val, dict) and all(isinstance(x, str) for x in val.values())
            else:
                ok = isinstance(val, str)
            if not isinstance(k, str) or not ok:
                raise ValueError(self.want)
        return dict(v)


@dataclass(frozen=True)
class Param:
    """One parameter of a fault kind: its name, type, the factory keyword it becomes, and whether it is required."""

    name: str
    type: Any
    arg: str = ""
    required: bool = False


def _p(name: str, type: Any, **kw: Any) -> Param:
    return Param(name, type, **kw)


SEED = _p("seed", Integer(0))
MS = Integer(0)  # Toxiproxy's attributes are whole milliseconds (bytes, KB/s)
TOXIC = (_p("stream", Choice("downstream", "upstream", "both")), _p("toxicity", Number(0.0, 1.0)),
         _p("name", Text()), _p("probe_via", Text()), _p("probe_enabled", Boolean()), SEED)
PROBE = (_p("probe_via", Text()), _p("probe_enabled", Boolean()), SEED)
WHOLE = (_p("recover_timeout_s", Number(above=0.0)), SEED)
RULE = (_p("fraction", Number(0.0, 1.0)), _p("spread", Choice("even", "random")),
        _p("match", TextMap(("path", "model", "header"), "a mapping with path, model or header")),
        _p("expect_hits", Boolean()), _p("limit", Integer(1)), SEED)
AFTER = _p("after_tokens", Integer(0, 2**31 - 1))
SECONDS = Number(0.0)

SPECS: dict[str, tuple[Param, ...]] = {
    # network (Toxiproxy)
    "latency": (_p("latency", MS), _p("jitter", MS), *TOXIC),
    "jitter": (_p("latency", MS), _p("jitter", MS), *TOXIC),
    "timeout": (_p("timeout", MS), *TOXIC),
    "reset-peer": (_p("timeout", MS), *TOXIC),
    "bandwidth": (_p("rate", Integer(1)), *TOXIC),
    "slicer": (_p("average_size", Integer(1)), _p("size_variation", MS), _p("delay", MS), *TOXIC),
    "limit-data": (_p("bytes", MS), *TOXIC),
    "slow-close": (_p("delay", MS), *TOXIC),
    "down": PROBE,
    "rank-link-cut": TOXIC,
    # whole replica
    "restart": WHOLE,
    "kill": (_p("signal", Signal(), arg="sig"), *WHOLE),
    "pause": WHOLE,
    "stop": WHOLE,
    "rank-freeze": (_p("rank", Integer(0)), _p("tp_rank", Integer(0)), _p("pp_rank", Integer(0)),
                    _p("dp_rank", Integer(0)), _p("pid", Integer(1)), SEED),
    # HTTP and stream faults (the fault proxy)
    "http-error": (_p("status", Integer(400, 599)), _p("retry_after", Text(numbers=True)), _p("message", Text()),
                   *RULE),
    "oom-error": RULE,
    "slow-headers": (_p("seconds", SECONDS, required=True), *RULE),
    "slow-first-token": (_p("seconds", SECONDS, required=True), *RULE),
    "stream-stall": (AFTER, _p("seconds", Number(above=0.0)), *RULE),
    "stream-cut": (AFTER, _p("done", Boolean()), *RULE),
    "error-chunk": (AFTER, _p("message", Text()), _p("code", Integer(100, 599)), *RULE),
    "malformed-chunk": (AFTER, *RULE),
    "duplicate-chunk": (AFTER, *RULE),
    "rewrite-model": (_p("model", Text(), required=True), *RULE),
    "header-fault": (_p("drop", TextList()), _p("set", TextMap()), *RULE),
    "hang": RULE,
    "corrupt-answer": (AFTER, _p("insert", Text()), *RULE),
}


def names(kind: str) -> list[str]:
    """The parameters `kind` takes, in declaration order."""
    return [p.name for p in SPECS[kind]]


def check(kind: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """`kind`'s factory keywords from `params`, each name known and each value checked and normalised;
    anything else is one ConfigError line naming the parameter and what it takes."""
    spec = SPECS.get(kind)
    if spec is None:
        raise ConfigError(f"unknown fault {kind!r}; known: {', '.join(SPECS)}")
    by_name = {p.name: p for p in spec}
    out: dict[str, Any] = {}
    for name, value in params.items():
        p = by_name.get(name)
        if p is None:
            close = difflib.get_close_matches(name, by_name, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"fault {kind}: unknown parameter {name!r}{hint}; it takes "
                              f"{', '.join(by_name) or 'none'}")
        try:
            out[p.arg or p.name] = p.type(value)
        except ValueError:
            raise ConfigError(f"fault {kind}: parameter {name}: expected {p.type.want}, got {_shown(value)}") from None
    missing = [p for p in spec if p.required and p.name not in params]
    if missing:
        raise ConfigError(f"fault {kind}: parameter {missing[0].name} is required ({missing[0].type.want})")
    return out


def as_value_error(kind: str, params: Mapping[str, Any]) -> None:
    """`check` for a pydantic validator: the same line as a ValueError, so a plan or schedule file
    reports it at its file:line."""
    try:
        check(kind, params)
    except ConfigError as e:
        raise ValueError(str(e)) from None
