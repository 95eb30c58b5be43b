"""Latency verdicts per prompt class against SLAs and a stored baseline; goodput."""
from __future__ import annotations

from pathlib import Path

import pytest

from chaos.env.model import LatencySLA, SLAs
from chaos.errors import ConfigError, SLOViolation
from chaos.load.records import RequestRecord
from chaos.verify.latency import latency_verdict, read_baseline, write_baseline

SLA = SLAs(latency={"short": LatencySLA(ttft_p99_s=0.5, e2e_p99_s=2.0), "long": LatencySLA(ttft_p99_s=1.5, e2e_p99_s=4.0)})


def recs(cls: str, e2es: list[float], ttft: float = 0.1) -> list[RequestRecord]:
    return [RequestRecord(f"{cls}{i}", 1, 100.0 + i * 0.01, ttft=ttft, e2e=e, prompt_class=cls, outcome="succeeded")
            for i, e in enumerate(e2es)]


@pytest.mark.parametrize("top, ok", [(1.999, True), (2.001, False)])
def test_p99_boundary_per_class(top: float, ok: bool) -> None:
    data = recs("short", [0.2] * 99 + [top]) + recs("long", [1.0] * 100)
    data += recs("short", [top] * 2)  # enough at the top that the P99 lands on it
    v = latency_verdict(data, SLA)
    assert v.row("short.e2e_p99").ok is ok and v.row("long.e2e_p99").ok is True
    assert v.row("short.ttft_p99").ok is True


def test_degraded_factor_widens_the_limit() -> None:
    data = recs("short", [5.0] * 10)
    assert latency_verdict(data, SLA).row("short.e2e_p99").ok is False
    assert latency_verdict(data, SLA, factor=3.0).row("short.e2e_p99").ok is True


def test_class_without_samples_is_not_applicable() -> None:
    v = latency_verdict(recs("short", [0.1] * 5), SLA)
    assert v.row("long.e2e_p99").ok is None and v.ok


def test_baseline_roundtrip_and_regression(tmp_path: Path) -> None:
    path = tmp_path / "base" / "baseline.json"
    doc = write_baseline(path, recs("short", [1.0] * 50), SLA, rel=0.2, abs_s=0.0)
    assert read_baseline(path)["classes"]["short"]["e2e"]["99"] == pytest.approx(1.0) == doc["classes"]["short"]["e2e"]["99"]
    same = latency_verdict(recs("short", [1.19] * 50), SLA, baseline=read_baseline(path))
    worse = latency_verdict(recs("short", [1.21] * 50), SLA, baseline=read_baseline(path))
    assert same.row("short.e2e_p99_vs_baseline").ok is True
    assert worse.row("short.e2e_p99_vs_baseline").ok is False
    with pytest.raises(SLOViolation, match="vs_baseline"):
        worse.assert_ok()


@pytest.mark.parametrize("content, message", [(None, "not found"), ("{", "not JSON"), ("[]", "classes"),
                                              ('{"classes": {}, "tolerance": {"rel": -1}}', "tolerance.rel")])
def test_bad_baseline_file(tmp_path: Path, content: str | None, message: str) -> None:
    p = tmp_path / "b.json"
    if content is not None:
        p.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        read_baseline(p)


def test_goodput_share() -> None:
    data = recs("short", [0.5] * 9 + [3.0])  # one request misses the 2 s E2E SLO
    data.append(RequestRecord("bad", 1, 100.5, error="http", status=503, prompt_class="short", outcome="failed"))
    row = latency_verdict(data, SLA, min_goodput_share=0.8).row("goodput_share")
    assert row.measured == pytest.approx(9 / 11) and row.ok is True
    assert latency_verdict(data, SLA, min_goodput_share=0.85).row("goodput_share").ok is False
