"""Detection across signals: for a fault, how long after it each signal the run watched first said something
was wrong; for the slow-but-healthy control (long prefills at the load's peak, no fault), how often and for how
long each said so anyway (its false alarms).

The signals, read from the run's timeline (chaos.experiment.run_load.observe and the recovery run's scraper):
the hurt replica's `/health` and `/v1/models` (a non-2xx answer, or none within the prober's timeout) and a
real completion to it (one that failed), each known when its answer came or its timeout ran out; the engine's
own iteration heartbeat (its decoded-token counter, `vllm:generation_tokens_total` less first tokens, not
advancing at FLOOR_TOKENS_PER_S per running request between two scrapes while requests ran, or a scrape that
failed); the gateway's `/health` in front of it; and the team's alert where the environment has one (the first
firing's start). Each signal is used raw, as a
watcher polling it with no threshold of its own would see it: a team's N-failures rule or timeout adds to its
detection time and takes away its short false alarms, and the control's longest false stretch says how long
such a threshold must be. Pure: no I/O."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chaos.observe.timeline import Sample, Timeline
from chaos.verify.progress_truth import FLOOR_TOKENS_PER_S, scrapes


@dataclass(frozen=True)
class Signal:
    """One signal: its key (in the summary), its name in the table, and its timeline source and sample name."""

    key: str
    label: str
    source: str
    name: str


def signals(replica: str) -> list[Signal]:
    """The signals of a recovery run that hurts `replica` (its probes are the primary sources, the API's `:api`)."""
    return [Signal("health", "/health", "health", "status"),
            Signal("models", "/v1/models", "models", "status"),
            Signal("completion", "a real completion", "completion", "ok"),
            Signal("heartbeat", "engine heartbeat (decoded tokens)", f"metrics:{replica}", ""),
            Signal("gateway", "the gateway's /health", "health:api", "status")]


ALERT = Signal("alert", "the team's alert", "alerts", "firing")
# the team's liveness probe, replayed at every phase (chaos.verify.liveness): detected is its luckiest phase's restart
LIVENESS = Signal("liveness", "the team's liveness probe", "liveness", "status")


def _bad_status(v: object) -> bool:
    return not (isinstance(v, int) and not isinstance(v, bool) and 200 <= v < 300)


@dataclass(frozen=True)
class Answer:
    """One probe: sent at t, known at `known` (t + its latency: when it answered or timed out), bad or not."""

    t: float
    known: float
    bad: bool


def answers(timeline: Timeline, source: str, name: str = "status") -> list[Answer]:
    """A prober's answers in the order they were sent: `name` "status" (bad: not a 2xx, or none in time) or "ok"
    (a completion prober's: bad unless it succeeded)."""
    took = {s.t: float(s.value) for s in timeline.series(source, "latency") if isinstance(s.value, (int, float))}
    return sorted((Answer(s.t, s.t + took.get(s.t, 0.0), s.value is not True if name == "ok" else _bad_status(s.value))
                   for s in timeline.series(source, name)), key=lambda a: a.t)


def observations(timeline: Timeline, signal: Signal) -> list[tuple[float, bool]]:
    """(t, bad) for each observation of `signal`, in time order; empty where it was not watched. A probe is stamped
    when it was sent; what it said is known once it answered or timed out, and that is its t here."""
    if signal.key == "heartbeat":
        return heartbeat(timeline.samples, signal.source)
    return sorted((a.known, a.bad) for a in answers(timeline, signal.source, signal.name))


def heartbeat(samples: Sequence[Sample], source: str,
              floor_tokens_per_s: float = FLOOR_TOKENS_PER_S) -> list[tuple[float, bool]]:
    """The engine's heartbeat at each scrape: bad where it decoded less than the floor per running request since
    the last scrape while requests ran at both, where its counter went back (a new engine), or where the scrape
    failed."""
    own = [s for s in samples if s.source == source]
    counters = scrapes(own)
    if not counters:  # never read (no /metrics, or not a vLLM-like engine): not watched, rather than always bad
        return []
    out = [(s.t, True) for s in own if s.name == "scrape_ok" and s.value is False]
    for a, b in zip(counters, counters[1:], strict=False):
        dt = b.t - a.t
        if dt <= 0:
            continue
        running = min(a.running, b.running)
        restarted = b.generated < a.generated
        stalled = running > 0 and (b.generated - a.generated) / dt < floor_tokens_per_s * running
        out.append((b.t, restarted or stalled))
    return sorted(out)


def first_bad(obs: Sequence[tuple[float, bool]], t0: float, until: float) -> float | None:
    """Seconds from `t0` to the first bad observation in [t0, until], or None."""
    return next((t - t0 for t, bad in obs if t0 <= t <= until and bad), None)


@dataclass(frozen=True)
class Alarms:
    """A signal's false alarms over a stretch with no fault: how many times it went bad, the longest bad stretch
    (s: from its first bad observation to the next good one) and how many observations it made."""

    count: int
    longest_s: float
    observed: int


def false_alarms(obs: Sequence[tuple[float, bool]], a: float, b: float) -> Alarms:
    """The bad stretches of `obs` within [a, b]."""
    inside = [(t, bad) for t, bad in obs if a <= t <= b]
    count, longest, start = 0, 0.0, None
    for t, bad in inside:
        if bad and start is None:
            count, start = count + 1, t
        elif not bad and start is not None:
            longest, start = max(longest, t - start), None
    if start is not None:
        longest = max(longest, inside[-1][0] - start)
    return Alarms(count, round(longest, 3), len(inside))


def alert_alarms(firings: Sequence[tuple[float, float | None]], a: float, b: float, step_s: float) -> Alarms:
    """The team's alerts over a stretch with no fault, from their firings (start, end or None while firing) that
    began within [a, b]: each one a false alarm, the longest as long as it fired within the stretch; observed is the
    rule evaluations the stretch held (one every `step_s`)."""
    inside = [(s, b if e is None else min(e, b)) for s, e in firings if a <= s <= b]
    longest = max((e - s for s, e in inside), default=0.0)
    return Alarms(len(inside), round(longest, 3), max(1, int((b - a) / step_s)))


def control_keys(signal: Signal) -> tuple[str, str, str]:
    """The summary keys (section "detection") of a signal's false alarms in the control: count, longest, observed."""
    return f"false_alarms_{signal.key}", f"false_longest_s_{signal.key}", f"observed_{signal.key}"
