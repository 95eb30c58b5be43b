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
