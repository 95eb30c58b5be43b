"""The ledger on its own: durable records, torn lines, owners, idempotent cleanup, CLI."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from chaos.cli import main as chaos_main
from chaos.faults import _undo
from chaos.faults.ledger import Ledger, cleanup


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])


def test_cleanup_replays_a_signal_record_of_a_dead_harness_once(tmp_path):
    p = _sleeper()
    try:
        os.kill(p.pid, signal.SIGSTOP)
        ledger = Ledger(tmp_path)
        ledger.record_inject({"kind": "rank-freeze"}, [_undo.send_signal(p.pid, signal.SIGCONT)])
        # pretend the record was written by a harness that is gone
        lines = ledger.path.read_text().splitlines()
        rec = json.loads(lines[0])
        rec["owner"] = {"pid": 999999, "start": 1}
        ledger.path.write_text(json.dumps(rec) + "\n" + '{"op": "inj')  # plus a torn line from a crash
        done = cleanup(tmp_path)
        assert done == [f"sent SIGCONT to pid {p.pid}"]
        time.sleep(0.05)
        assert open(f"/proc/{p.pid}/stat").read().split(") ")[1][0] != "T"
        assert cleanup(tmp_path) == []
    finally:
        p.kill()
        p.wait()


def test_records_of_a_live_other_harness_are_left_alone_unless_forced(tmp_path):
    p = _sleeper()
    try:
        ledger = Ledger(tmp_path)
        ledger.record_inject({"kind": "x"}, [{"kind": "none", "note": "noop"}])
        rec = json.loads(ledger.path.read_text())
        rec["owner"] = {"pid": p.pid, "start": None}
        ledger.path.write_text(json.dumps(rec) + "\n")
        assert cleanup(tmp_path) == []
        assert len(ledger.outstanding()) == 1
        assert cleanup(tmp_path, force=True) == ["noop"]
        assert ledger.outstanding() == []
    finally:
        p.kill()
        p.wait()


def test_cli_cleanup_and_dry_run(tmp_path, capsys):
    Ledger(tmp_path).record_inject({"kind": "x"}, [{"kind": "none", "note": "undone-by-cli"}])
    assert chaos_main(["cleanup", "--state-dir", str(tmp_path)]) == 0
    assert "undone-by-cli" in capsys.readouterr().out
    assert chaos_main(["fault", "inject", "latency", "--proxy", "client", "--param", "latency=500", "--dry-run"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["dry_run"] and plan["params"]["attributes"]["latency"] == 500
    assert chaos_main(["fault", "inject", "rank-freeze", "--target", "nope", "--dry-run"]) == 2
    assert "no target 'nope'" in capsys.readouterr().err


def test_a_revert_waits_for_a_crashed_replica_as_long_as_the_recovery_verdict_allows(tmp_path) -> None:
    """Twice the recovery SLA, at least a cold start: a real vLLM back in 241-260 s (recovery_s 300)
    must reach the recovery verdict, not fail its revert at cold_start_s 240."""
    from chaos.env import load
    from chaos.faults.base import Policy

    vllm = load("local-vllm", environ={})
    assert Policy.for_env(vllm).recover_timeout_s == max(vllm.slas.cold_start_s, 2 * vllm.slas.recovery_s) == 600
    local = load("local", environ={})
    assert Policy.for_env(local).recover_timeout_s == max(local.slas.cold_start_s, 2 * local.slas.recovery_s)
