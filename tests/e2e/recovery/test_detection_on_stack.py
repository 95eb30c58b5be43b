"""Detection across signals on the embedded stack (a copy of environments/local.yaml on free ports), as a team
runs it: the slow-but-healthy control first, then a crash; the crash's report holds the detection table, each
signal the stack has detecting it in seconds beside its false alarms in the control, and the checklist item
`detection-signals` is proven under --require-proven."""
from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from tests._support import require
from tests.e2e.suite_on_stack import checklist_status, run_suite_on_local_copy

# local has every signal but its heartbeat, gateway, alert and liveness probe are what a stack may lack: all are here
LIVENESS = "the team's liveness probe (GET /health, 1 s timeout, every 5 s, restart after 3 failures in a row)"
SIGNALS = ["/health", "/v1/models", "a real completion", "engine heartbeat (decoded tokens)", "the gateway's /health",
           "the team's alert", LIVENESS]
# a crash heals within seconds on local: the probe, needing 10 s of failures, may restart it at some phases or none
RESTARTS = r"\d+\.\d\d-\d+\.\d\d \(restart, by phase\)|\d+\.\d\d at the luckiest phase; no restart within \d+ s at \d+|" \
           r"no restart within \d+ s at any of 20 phases"


def _table(results: Path, fault: str) -> dict[str, list[str]]:
    for f in results.glob("*-attachment.html"):
        text = f.read_text(encoding="utf-8")
        if f"<caption>detection across signals: {fault}</caption>" in text:
            rows = [[html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", row)]
                    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", text)]
            return {r[0]: r[1:] for r in rows if r}
    return {}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_crash_is_detected_by_every_signal_beside_the_controls_false_alarms(tmp_path: Path) -> None:
    require("toxiproxy")
    results = tmp_path / "results"
    r = run_suite_on_local_copy(tmp_path, "suites/recovery/test_recovery.py", args=[
        "-k", "slow_but_healthy or (crash-sigkill and steady-users)", "--allow-destructive", "--alluredir", str(results)])
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "2 passed" in out, out[-4000:]
    assert checklist_status(out, "detection-signals") == "proven", out[-4000:]
    table = _table(results, "crash-sigkill")
    assert list(table) == SIGNALS, (table, out[-2000:])
    for signal, (detected, alarms, _longest) in table.items():
        if signal == LIVENESS:  # replayed at each phase: the control restarted it at none (its verdict's row)
            assert re.fullmatch(RESTARTS, detected) and alarms == "a restart at 0 of 20 phases", (detected, alarms)
            continue
        assert re.fullmatch(r"\d+\.\d\d", detected), (signal, detected)  # seen, in seconds after the fault
        assert re.fullmatch(r"\d+ in [1-9]\d* observations", alarms), (signal, alarms)  # the alert's: its firings
    # the catching side, judged in the crash's own verdict: local's crash heals well within what the probe may take
    caught = [f for f in results.glob("*-attachment.html") if "liveness_probe_catch_s" in f.read_text(encoding="utf-8")]
    assert len(caught) == 1, [f.name for f in caught]
    assert "nothing for it to catch" in html.unescape(caught[0].read_text(encoding="utf-8")), caught[0]
