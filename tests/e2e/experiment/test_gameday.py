"""`chaos gameday --plan` against the embedded stack, as an SRE runs it: a plan whose second
experiment breaches the abort limit stops there, reverted, ABORTED, and its third never starts;
`chaos stop` from another terminal and SIGTERM each revert the fault in hand within 2 s, and the
journal says who stopped it and when (`chaos stop` also from another directory, by CHAOS_ENV alone)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaos.env import load
from chaos.faults.ledger import Ledger
from tests._support import FIXED_OFFSETS, REPO, require

OFFSET = str(FIXED_OFFSETS["gameday"])  # its own ports and state dir: never the stack a user has up
ENV = {**os.environ, "CHAOS_PORT_OFFSET": OFFSET, "CHAOS_ENV_DIR": str(REPO / "environments")}


@pytest.fixture(autouse=True)
def _components():
    from chaos.pytest_plugin import require_component
    from tests.standins.faultproxy.conftest import faultproxy_missing

    require("toxiproxy")
    require_component("faultproxy", faultproxy_missing())


def _journal(out: Path) -> dict:
    files = sorted(out.glob("*/journal.json"))
    return json.loads(files[-1].read_text()) if files else {"events": []}


def _events(out: Path, kind: str) -> list[dict]:
    return [e for e in _journal(out)["events"] if e["event"] == kind]


def _gameday(plan: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "chaos.cli", "gameday", "--env", "local", "--plan", str(plan),
                             "--out", str(out), "--no-live"], cwd=REPO, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _finish(p: subprocess.Popen, timeout: float = 240) -> str:
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        raise AssertionError(f"the game day did not end within {timeout} s:\n{out[-3000:]}") from None
    return out


@pytest.mark.slow
def test_an_abort_reverts_at_once_and_the_next_experiment_never_starts(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text("""\
name: abort proof
hypothesis: {error_share_below: 0.05, min_requests: 5}
window_s: 4
experiments:
  - name: first holds
    fault: {kind: latency, proxy: client, latency: 400}
    hold_s: 4
  - name: second breaches the abort limit
    fault: {kind: down, proxy: client}
    hold_s: 120
    load: {retry_policy: null}
  - name: third never starts
    fault: {kind: latency, proxy: client, latency: 400}
    hold_s: 4
""")
    out = tmp_path / "out"
    p = _gameday(plan, out)
    text = _finish(p)
    assert p.returncode == 3, text[-3000:]
    ended = {e["experiment"]: e["status"] for e in _events(out, "ExperimentEnded")}
    assert ended == {"first holds": "PASSED", "second breaches the abort limit": "ABORTED",
                     "third never starts": "NOT STARTED"}, text[-3000:]
    aborted = _events(out, "Aborted")[0]
    assert "over safety.abort.error_rate 50%" in aborted["reason"]
    reverted = [e for e in _events(out, "FaultReverted") if e["experiment"] == aborted["experiment"]]
    assert reverted and reverted[0]["ok"] and reverted[0]["t"] - aborted["t"] < 2.0
    injected = [e for e in _events(out, "FaultInjected") if e["experiment"] == aborted["experiment"]][0]
    assert aborted["t"] - injected["t"] < 30, "the guard fired within the hold, long before its end"
    assert not any(e["experiment"] == "third never starts" for e in _events(out, "PhaseStarted"))
    env = load("local", environ=ENV)
    assert Ledger(env.state_dir).outstanding() == []
    summary = next(out.glob("*/summary.md")).read_text()
    assert "| second breaches the abort limit | ABORTED |" in summary and "| third never starts | NOT STARTED |" in summary
    results = [json.loads(f.read_text()) for f in out.glob("*/allure-results/*-result.json")]
    assert {r["name"]: r["status"] for r in results}["second breaches the abort limit"] == "broken"
    assert (next(out.glob("*/allure-results")) / "categories.json").exists()


def _stopped_while_holding(tmp_path, how: str) -> tuple[dict, dict, float, str, int]:
    plan = tmp_path / "plan.yaml"
    plan.write_text("name: stop proof\nhypothesis: {error_share_below: 0.05}\nwindow_s: 4\nexperiments:\n"
                    "  - name: long jitter\n    fault: {kind: latency, proxy: client, latency: 400}\n    hold_s: 180\n")
    out = tmp_path / "out"
    p = _gameday(plan, out)
    deadline = time.monotonic() + 180
    while not _events(out, "FaultInjected"):
        assert p.poll() is None and time.monotonic() < deadline, (p.poll(), p.stdout.read() if p.poll() else "")
        time.sleep(0.2)
    time.sleep(1.0)
    asked = time.time()
    if how == "chaos stop":
        r = subprocess.run([sys.executable, "-m", "chaos.cli", "stop", "--env", "local", "--reason", "pager"],
                           cwd=REPO, env=ENV, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    elif how == "chaos stop elsewhere":  # another terminal, another directory: the file by CHAOS_ENV alone
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        env = {k: v for k, v in ENV.items() if k != "CHAOS_ENV_DIR"}
        env["CHAOS_ENV"] = str(REPO / "environments" / "local.yaml")
        r = subprocess.run([sys.executable, "-m", "chaos.cli", "stop", "--reason", "pager"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    else:
        p.send_signal(signal.SIGTERM)
    text = _finish(p, 120)
    reverted, stopped = _events(out, "FaultReverted")[0], _events(out, "Stopped")[0]
    return reverted, stopped, asked, text, p.returncode


@pytest.mark.slow
@pytest.mark.parametrize("how", ["chaos stop", "chaos stop elsewhere", "SIGTERM"])
def test_an_emergency_stop_reverts_within_two_seconds_and_says_who(tmp_path, how):
    reverted, stopped, asked, text, rc = _stopped_while_holding(tmp_path, how)
    assert rc == 2, text[-3000:]
    assert reverted["ok"] and reverted["t"] - asked < 2.0, (reverted["t"] - asked, text[-2000:])
    if how.startswith("chaos stop"):
        assert stopped["by"].startswith("chaos stop (") and stopped["reason"] == "pager"
    else:
        assert stopped["by"] == "SIGTERM"
    assert Ledger(load("local", environ=ENV).state_dir).outstanding() == []
