"""A toxic's baseline is the fastest answered of a few probes: one probe's server time on a busy machine was
noise larger than a 30 ms latency toxic's tolerance (a fresh-clone e2e failure, proven 26.3 ms of the 27 asked)."""
from __future__ import annotations

from chaos.faults.network import BASELINE_PROBES, ToxicFault
from chaos.faults.probe import ProbeResult


def _fault(results: list[ProbeResult]) -> tuple[ToxicFault, list[float]]:
    f = ToxicFault("http://127.0.0.1:1", "p", "latency", {"latency": 30})
    asked: list[float] = []

    def fake(window_s: float) -> ProbeResult:
        asked.append(window_s)
        return results[len(asked) - 1]

    f._probe = fake  # type: ignore[method-assign]
    return f, asked


def test_the_fastest_answered_probe_is_the_baseline():
    slow, fast, mid = (ProbeResult(ttfb_s=t, nbytes=10) for t in (0.0051, 0.0014, 0.003))
    f, asked = _fault([slow, fast, mid])
    assert f._fastest_probe(BASELINE_PROBES) is fast and len(asked) == BASELINE_PROBES == 3


def test_a_silent_upstream_is_probed_once():
    f, asked = _fault([ProbeResult(ttfb_s=None, nbytes=0)])
    assert not f._fastest_probe(BASELINE_PROBES).answered() and len(asked) == 1


def _judged(baseline_s: float, during_s: float, latency_ms: int = 300) -> bool:
    f = ToxicFault("http://127.0.0.1:1", "p", "latency", {"latency": latency_ms})
    f.baseline = ProbeResult(ttfb_s=baseline_s, nbytes=215)
    f._probe = lambda window_s: ProbeResult(ttfb_s=during_s, nbytes=215)  # type: ignore[method-assign]
    return f._judge() is None


def test_a_latency_toxic_is_seen_when_its_answer_took_the_toxics_latency_whatever_a_slow_baseline_said():
    """A busy host: the fastest baseline took 46 ms, the answer under a 300 ms toxic 307 ms (the upstream's own 7)."""
    assert _judged(0.046, 0.307)
    assert _judged(0.005, 0.280)  # 275 ms later than the baseline: 0.9 of the toxic's
    assert not _judged(0.046, 0.250)  # neither 270 ms later nor the toxic's 285 ms
    assert not _judged(0.200, 0.300)  # an upstream as slow as half the toxic: only a 270 ms difference counts
