"""Progress truth: a replica whose /health said 200 while its engine decoded nothing for requests it held.

From each replica's own counters scraped over the run (`vllm:generation_tokens_total`,
`vllm:num_requests_running`, chaos.observe.metrics.MetricsScraper with source `metrics:<replica>`) and its
/health probes (`health:<replica>`). Between two scrapes, the engine made no progress when requests were
running at both and it generated fewer tokens per second than `floor_tokens_per_s` per running request:
the least any serving engine gives a sequence it is decoding, so new requests' first tokens (a decode
stall still prefills) do not pass for progress. A stall while /health answered 2xx is a lie; the longest
one is judged against `slas.health_truth_s`. Counters that could not be read, or gaps in them long enough to
hide such a lie, make the row "not proven", never a pass. Times are printed relative to the fault (t+...).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from chaos.observe.timeline import Sample, Timeline
from chaos.verify.stream_progress import DecodingStream, stream_progress
from chaos.verify.verdict import Verdict

GENERATED, RUNNING = "vllm:generation_tokens_total", "vllm:num_requests_running"
# one per first token (vLLM observes the TTFT histogram as it counts the token): generated minus these is what the
# engine decoded. A stalled engine still prefills, and on a slow engine with a churning load (clients that give up
# and ask again) its new requests' first tokens outpaced the floor (real vLLM on CPU: 3.2 tokens/s of first tokens
# with 4 requests held)
FIRST_TOKENS = "vllm:time_to_first_token_seconds_count"
# far below any real engine's per-sequence decode rate (vLLM on CPU decodes a few tokens/s per sequence at
# worst; a GPU tens to hundreds), far above the first tokens a stalled engine's new arrivals add
FLOOR_TOKENS_PER_S = 1.0
STREAMS = "the fault proxy's streams"


@dataclass(frozen=True)
class Scrape:
    """The replica's counters at time t (epoch seconds), summed over its engines."""

    t: float
    generated: float
    running: float


@dataclass
class Stall:
    """A window in which /health said healthy while the engine made no progress (epoch seconds)."""

    start: float
    end: float
    generated: float = 0.0
    running_max: float = 0.0

    @property
    def length_s(self) -> float:
        return self.end - self.start

    @property
    def tokens_per_s(self) -> float:
        return self.generated / self.length_s if self.length_s > 0 else 0.0


@dataclass
class Progress:
    """One replica's scrapes compared with its health claims over [start, end]."""

    start: float
    end: float
    lies: list[Stall]
    unknown: list[tuple[float, float]]
    busy_s: float  # seconds with requests running at both ends of a scrape interval

    def longest(self) -> Stall | None:
        return max(self.lies, key=lambda x: x.length_s, default=None)

    @property
    def unknown_s(self) -> float:
        return max((b - a for a, b in self.unknown), default=0.0)


def scrapes(samples: Sequence[Sample]) -> list[Scrape]:
    """The scrapes that carry both counters (one MetricsScraper poll writes all its samples at one t); where the
    replica counts first tokens too, `generated` is what it decoded (generated tokens less first tokens)."""
    gen: dict[float, float] = defaultdict(float)
    run: dict[float, float] = defaultdict(float)
    first: dict[float, float] = defaultdict(float)
    for s in samples:
        if s.name == GENERATED:
            gen[s.t] += float(s.value)
        elif s.name == RUNNING:
            run[s.t] += float(s.value)
        elif s.name == FIRST_TOKENS:
            first[s.t] += float(s.value)
    return [Scrape(t, gen[t] - first.get(t, 0.0), run[t]) for t in sorted(set(gen) & set(run))]


def _healthy_at(claims: Sequence[Sample], i: int, t: float, stale_s: float) -> bool | None:
    """The claim in force at t (claims[i] is the last at or before t): True 2xx, False not, None unknown."""
    if i < 0 or t - claims[i].t > stale_s:
        return None
    v = claims[i].value
    return isinstance(v, int) and not isinstance(v, bool) and 200 <= v < 300


def compare(counters: Sequence[Scrape], claims: Sequence[Sample], *, floor_tokens_per_s: float = FLOOR_TOKENS_PER_S,
            scrape_stale_s: float = 3.0, claim_stale_s: float = 2.0) -> Progress | None:
    """Stalls /health called healthy, and unknown spans, of one replica; None without two scrapes or any claim."""
    cs = sorted(claims, key=lambda s: s.t)
    if len(counters) < 2 or not cs:
        return None
    lies: list[Stall] = []
    unknown: list[tuple[float, float]] = []
    busy = 0.0
    for a, b in zip(counters, counters[1:], strict=False):
        dt = b.t - a.t
        if dt <= 0:
            continue
        if dt > scrape_stale_s:
            _grow(unknown, a.t, b.t)
            continue
        running = min(a.running, b.running)
        if running <= 0:
            continue
        busy += dt
        made = b.generated - a.generated
        if made < 0:  # the counter went back: a new engine process; a restart is judged by recovery, not here
            continue
        if made / dt >= floor_tokens_per_s * running:
            continue
        _stalled(lies, unknown, cs, a.t, b.t, made, running, claim_stale_s)
    return Progress(counters[0].t, counters[-1].t, lies, unknown, busy)


def _stalled(lies: list[Stall], unknown: list[tuple[float, float]], claims: Sequence[Sample], a: float, b: float,
             made: float, running: float, stale_s: float) -> None:
    """Split the stalled interval [a, b] at the claims inside it; the healthy parts are lies."""
    times = [c.t for c in claims]
    cuts = sorted({a, b} | {t for t in times if a < t < b})
    i = max((k for k, t in enumerate(times) if t <= a), default=-1)
    for x, y in zip(cuts, cuts[1:], strict=False):
        while i + 1 < len(claims) and claims[i + 1].t <= x:
            i += 1
        healthy = _healthy_at(claims, i, x, stale_s)
        if healthy is None:
            _grow(unknown, x, y)
        elif healthy:
            share = made * (y - x) / (b - a)
            if lies and lies[-1].end == x:
                lies[-1].end, lies[-1].generated = y, lies[-1].generated + share
                lies[-1].running_max = max(lies[-1].running_max, running)
            else:
                lies.append(Stall(x, y, share, running))


def _grow(spans: list[tuple[float, float]], a: float, b: float) -> None:
    if spans and spans[-1][1] == a:
        spans[-1] = (spans[-1][0], b)
    else:
        spans.append((a, b))


def _rel(t: float, t0: float) -> str:
    d = t - t0
    return f"t{'+' if d >= 0 else '-'}{abs(d):.1f}"


def describe(lie: Stall, t0: float, floor_tokens_per_s: float) -> str:
    """'/health said 200 for 12.0 s (t+0.5..t+12.5) while nothing decoded: 0.0 tokens/s with up to 4 running'."""
    return (f"/health said 200 for {lie.length_s:.1f} s ({_rel(lie.start, t0)}..{_rel(lie.end, t0)}) while nothing "
            f"decoded: {lie.tokens_per_s:.1f} tokens/s generated with up to {lie.running_max:.0f} request(s) running "
            f"(floor {floor_tokens_per_s:g} tokens/s per running request)")


def within_windows(counters: Sequence[Scrape], claims: Sequence[Sample], windows: Sequence[tuple[float, float]], *,
                   floor_tokens_per_s: float = FLOOR_TOKENS_PER_S) -> Progress | None:
    """compare() over the scrapes inside each window (epoch seconds), as one Progress; None where no window
    holds two scrapes. The intervals between windows (a fault's, judged by recovery) are left out; a window
    without two scrapes is unknown as a whole (the other windows' scrapes say nothing of it)."""
    lies: list[Stall] = []
    unknown: list[tuple[float, float]] = []
    busy, seen = 0.0, []
    for a, b in windows:
        p = compare([c for c in counters if a <= c.t <= b], claims, floor_tokens_per_s=floor_tokens_per_s)
        if p is None:
            unknown.append((a, b))
            continue
        lies += p.lies
        unknown += p.unknown
        busy += p.busy_s
        seen.append(p)
    if not seen:
        return None
    return Progress(seen[0].start, seen[-1].end, lies, unknown, busy)


def stream_lies(streams: Sequence[DecodingStream], claims: Sequence[Sample], windows: Sequence[tuple[float, float]],
                *, claim_stale_s: float = 2.0) -> Progress | None:
    """The fault proxy's view (chaos.verify.stream_progress): the spans in which every stream the replica was
    decoding paused, split at its health claims; healthy parts are lies. None without streams or claims."""
    cs = sorted(claims, key=lambda c: c.t)
    if not streams or not cs:
        return None
    lies: list[Stall] = []
    unknown: list[tuple[float, float]] = []
    busy = 0.0
    for a, b in windows:
        sp = stream_progress(streams, a, b)
        busy += sp.busy_s
        unknown += sp.unknown
        for x, y, paused in sp.stalls:
            _stalled(lies, unknown, cs, x, y, 0.0, paused, claim_stale_s)
    return Progress(windows[0][0], windows[-1][1], lies, unknown, busy)


@dataclass(frozen=True)
class SourceVerdict:
    """What one source of progress says of one replica: fail, pass or unknown, its longest lie, and why."""

    outcome: str  # fail | pass | unknown | unreadable (the counters: not proven, as unknown)
    worst: float | None
    detail: str


def _streams_paused(lie: Stall, t0: float) -> str:
    return (f"/health said 200 for {lie.length_s:.1f} s ({_rel(lie.start, t0)}..{_rel(lie.end, t0)}) while nothing "
            f"decoded: every stream it was decoding paused, up to {lie.running_max:.0f} at once")


def _judge(pr: Progress, limit_s: float, t_fault: float, said_by: str, span: str,
           tell: Callable[[Stall, float], str]) -> SourceVerdict:
    """One source's verdict on `pr`; `tell(lie, t_fault)` words its longest lie as that source saw it."""
    lie = pr.longest()
    worst = round(lie.length_s, 3) if lie else 0.0
    said = tell(lie, t_fault) if lie else "/health never said 200 while nothing decoded"
    detail = f"{said_by}: {said}; {len(pr.lies)} such window(s), {span}"
    if lie is not None and lie.length_s > limit_s:
        return SourceVerdict("fail", worst, detail)
    if pr.unknown_s > limit_s:
        a, b = max(pr.unknown, key=lambda ab: ab[1] - ab[0])
        return SourceVerdict("unknown", worst, f"{detail}; unknown for {b - a:.1f} s ({_rel(a, t_fault)}.."
                             f"{_rel(b, t_fault)}): a stall could hide there")
    if pr.busy_s <= 0:
        return SourceVerdict("unknown", worst, f"{detail}; no request ran on it: its progress was never asked for")
    return SourceVerdict("pass", worst, f"{detail}; requests ran for {pr.busy_s:.1f} s")


def _from_counters(timeline: Timeline, rep: str, claims: Sequence[Sample], t_fault: float, limit_s: float,
                   windows: Sequence[tuple[float, float]], floor: float) -> SourceVerdict:
    """The engine's own counters (its /metrics, scraped into the timeline)."""
    metrics = [s for s in timeline.samples if s.source == f"metrics:{rep}"]
    counters = scrapes(metrics)
    if len(counters) < 2:
        failed = sum(1 for s in metrics if s.name == "scrape_ok" and s.value is False)
        why = (f"{failed} scrape(s) of its /metrics failed" if failed else
               f"its /metrics never showed {GENERATED} and {RUNNING}" if metrics else "its /metrics was not scraped")
        return SourceVerdict("unreadable", None, f"the engine's counters cannot be read ({why})")
    pr = (within_windows(counters, claims, windows, floor_tokens_per_s=floor) if windows else
          compare(counters, claims, floor_tokens_per_s=floor))
    spans = ", ".join(f"{_rel(a, t_fault)}..{_rel(b, t_fault)}" for a, b in windows)
    if pr is None:
        return SourceVerdict("unknown", None, f"fewer than two scrapes of its counters in {spans}")
    inside = [c for c in counters if any(a <= c.t <= b for a, b in windows)] if windows else counters
    span = f"{len(inside)} scrapes over {_rel(pr.start, t_fault)}..{_rel(pr.end, t_fault)}"
    if windows:
        span += f" (the steady states: {spans})"
    return _judge(pr, limit_s, t_fault, "the engine's counters", span, lambda lie, t0: describe(lie, t0, floor))


def _from_streams(streams: Sequence[DecodingStream] | str | None, claims: Sequence[Sample], t_fault: float,
                  limit_s: float, windows: Sequence[tuple[float, float]]) -> SourceVerdict:
    """The fault proxy's log of each stream's pauses (a str: why it could not be read)."""
    if isinstance(streams, str):
        return SourceVerdict("unknown", None, streams)
    if not streams:
        return SourceVerdict("unknown", None, "the fault proxy's log lists no stream's pauses (decode_gaps)")
    # no windows: the span the run probed /health over (the log read holds streams from before the run too)
    spans = list(windows) or [(min(c.t for c in claims), max(c.t for c in claims))]
    pr = stream_lies(streams, claims, spans)
    assert pr is not None  # streams and claims are both there
    seen = sum(1 for s in streams if any(s.end > a and s.start < b for a, b in spans))
    span = f"{seen} streams decoding over " + ", ".join(f"{_rel(a, t_fault)}..{_rel(b, t_fault)}" for a, b in spans)
    return _judge(pr, limit_s, t_fault, STREAMS, span, _streams_paused)


def progress_truth_rows(v: Verdict, timeline: Timeline, t_fault: float, limit_s: float,
                        replicas: Sequence[str] | Mapping[str, str], *, fault: str | None = None,
                        floor_tokens_per_s: float = FLOOR_TOKENS_PER_S,
                        windows: Sequence[tuple[float, float]] = (), items: Sequence[str] = (),
                        streams: Mapping[str, Sequence[DecodingStream] | str | None] | None = None) -> None:
    """One row per replica, `progress_truth <replica>`: the longest time its /health said 200 while it decoded
    nothing for the requests it held, against `limit_s`, from two sources: the engine's counters, and (where
    `streams` has the replica) the fault proxy's log of each stream's pauses. Either source seeing a lie past the
    limit fails the row; one that proves none passes it; neither: not proven. `replicas`: names (their /health
    probes' source `health:<name>`) or {name: that source}. `windows`: judge only inside them (the steady states
    around a fault), else the whole run; `items`: the checklist items a row that is not proven leaves unproven."""
    name = fault or "no fault"
    sources = dict(replicas) if isinstance(replicas, Mapping) else {r: f"health:{r}" for r in replicas}
    for rep, health_source in sources.items():
        check = f"progress_truth {rep}"
        claims = timeline.series(health_source, "status")
        said = [_from_counters(timeline, rep, claims, t_fault, limit_s, windows, floor_tokens_per_s)]
        if not claims:
            why = (f"{said[0].detail}: whether it decoded while /health said 200 is unknown"
                   if said[0].outcome == "unreadable" else "no /health probes: what its health said while it decoded is unknown")
            v.not_proven(check, limit_s, None, f"{name}: {rep}: {why}", items=items)
            continue
        if streams is not None and rep in streams:
            said.append(_from_streams(streams[rep], claims, t_fault, limit_s, windows))
        worst = max((s.worst for s in said if s.worst is not None), default=None)
        failed = [s for s in said if s.outcome == "fail"]
        detail = f"{name}: {rep}: " + "; ".join(s.detail for s in failed + [s for s in said if s not in failed])
        if failed:
            v.add(check, limit_s, worst, False, detail)
        elif any(s.outcome == "pass" for s in said):
            v.add(check, limit_s, worst, True, detail)
        else:
            v.not_proven(check, limit_s, worst, f"{detail}: whether it decoded while /health said 200 is unknown",
                         items=items)
