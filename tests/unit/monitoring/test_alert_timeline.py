"""Alert firings drawn on the run timeline beside the fault window."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from matplotlib import pyplot as plt  # noqa: E402

from chaos.observe.timeline import Timeline  # noqa: E402
from chaos.report.timeline import _alert_bands, plot_timeline  # noqa: E402


def test_each_firing_is_a_band_with_its_name_and_a_still_firing_one_runs_to_the_end() -> None:
    tl = Timeline()
    tl.event("alert", "LLMErrorRateRollback", t=110.0, end=130.0)
    tl.event("alert", "LLMReplicaRestarted", t=120.0, end=None)
    fig, ax = plt.subplots()
    _alert_bands(ax, tl, 100.0, 200.0)
    xs = sorted((p.get_x(), p.get_x() + p.get_width()) for p in ax.patches)  # type: ignore[attr-defined]
    assert xs == [(10.0, 30.0), (20.0, 100.0)]
    assert {t.get_text() for t in ax.texts} == {"LLMErrorRateRollback", "LLMReplicaRestarted"}
    plt.close(fig)
    tl.event("phase", "start", t=100.0)
    tl.event("phase", "end", t=200.0)
    assert plot_timeline([], tl)[:8] == b"\x89PNG\r\n\x1a\n"  # the whole plot draws them too
