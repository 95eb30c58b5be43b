"""Timeline PNGs: valid images, fault windows shaded, breaker states drawn, degenerate input handled."""
from __future__ import annotations

import io
import struct

import numpy as np
from matplotlib.image import imread

from chaos.load.records import RequestRecord
from chaos.observe.timeline import Timeline
from chaos.report.series import Window
from chaos.report.timeline import plot_breaker, plot_timeline

T = 1_700_000_000.0


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def shaded_fraction(data: bytes) -> float:
    """Share of pixels with the pale red of a fault window (red-dominant, light)."""
    img = imread(io.BytesIO(data))[..., :3]
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    return float(np.mean((r > 0.95) & (g > 0.85) & (g < 0.93) & (b > 0.85) & (b < 0.93)))


def records(n: int = 300) -> list[RequestRecord]:
    return [RequestRecord(str(i), 1, T + i * 0.1, e2e=0.2 + (1.0 if 10 <= i * 0.1 < 20 else 0),
                          error="reset" if i % 17 == 0 else None) for i in range(n)]


def test_timeline_png_has_the_fault_window_shaded(tmp_path):
    tl = Timeline()
    tl.event("phase", "steady state", t=T)
    for k in range(30):
        tl.sample("health", "status", 503 if 11 <= k < 21 else 200, t=T + k, target="replica-a")
    plain = plot_timeline(records(), tl)
    tl.event("fault_inject", "kill replica-a", t=T + 10)
    tl.event("fault_revert", "kill replica-a", t=T + 20)
    out = tmp_path / "tl.png"
    shaded = plot_timeline(records(), tl, path=out, title="recovery")
    assert out.read_bytes() == shaded
    assert png_size(shaded) == (1200, 900)
    assert shaded_fraction(shaded) > shaded_fraction(plain) + 0.03


def test_explicit_windows_and_no_data_still_render():
    data = plot_timeline([], None, windows=[Window(T, T + 1, "x")])
    assert png_size(data) == (1200, 900)


def test_breaker_png_with_string_and_numeric_states():
    tl = Timeline()
    for k in range(20):
        tl.sample("gateway", "pool_state", "degraded" if 5 <= k < 12 else "closed", t=T + k, pool="canary")
        tl.sample("gateway", "pool_state", 0, t=T + k, pool="stable")
        tl.sample("gateway", "traffic_share", 0.0 if 5 <= k < 12 else 0.1, t=T + k, pool="canary")
    a = plot_breaker(tl, [(T + 4.5, "error rate >= 1 %")])
    b = plot_breaker(tl, [(T + 4.5, "error rate >= 1 %")], records(200))
    assert png_size(a) == png_size(b) == (1200, 700)
    assert a != b


def test_breaker_without_samples_renders_a_notice():
    assert png_size(plot_breaker(Timeline())) == (1200, 700)
