"""Stage 1 of a suite: a fault's proof that could not run is "not proven", never a pass nor a failure."""
from __future__ import annotations

from chaos import fault_happened


def _measured(probe) -> bool:
    """a probe through the proxy saw the toxic's effect"""
    return isinstance(probe, dict) and probe.get("during") is not None


def test_an_inconclusive_probe_is_not_proven() -> None:
    v = fault_happened({"listed": ["jitter"], "probe": "inconclusive: upstream silent at baseline"},
                       listed=bool, probe=_measured)
    assert v.ok and v.row("listed").ok is True
    row = v.row("probe")
    assert row.ok is None and row.unproven == "stage 1 could not check it: inconclusive: upstream silent at baseline"


def test_a_probe_that_saw_nothing_still_fails() -> None:
    v = fault_happened({"probe": {"during": None}}, probe=_measured)
    assert v.row("probe").ok is False and not v.unproven
