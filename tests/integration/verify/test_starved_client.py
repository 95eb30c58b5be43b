"""A starved client is not a slow client: a compliant client run in a CPU cgroup capped at 2 % of a
core gets "not proven: the host starved the client (N s of CPU in M s)" from `chaos backoff-check`
and from the clients and streams suites' verdicts (their own functions: check_backoff, the stream
client verdicts), never a FAIL and never a wait to the time limit; the same client uncapped passes.

Needs root and a CPU cgroup controller (v1 `cpu` or v2 `cpu.max`); skipped with the reason without."""
from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.env import RetryPolicy
from chaos.verify.backoff_run import check_backoff
from chaos.verify.recorder import Recorder
from chaos.verify.streams import client_verdict, run_client_command, steady_verdict
from tests._support import cpu_capped_cgroup, in_cgroup

ROOT = Path(__file__).resolve().parents[3]
CLIENT = f"{shlex.quote(sys.executable)} {ROOT / 'examples' / 'clients' / 'reference_client.py'} {{base_url}}"


@pytest.fixture
def capped() -> Iterator[Path]:
    with cpu_capped_cgroup() as procs:
        yield procs


def test_backoff_check_says_not_proven_for_a_starved_client_and_pass_for_it_uncapped(capped: Path):
    chaos = [sys.executable, "-m", "chaos.cli", "backoff-check", "--clients", "4", "--client-cmd"]
    t0 = time.monotonic()
    r = subprocess.run([*chaos, in_cgroup(capped, CLIENT)], capture_output=True, text=True, timeout=180)
    took = time.monotonic() - t0
    out = " ".join(r.stdout.split())
    assert r.returncode == 1 and "FAIL" not in out, out[-1500:]
    assert "NOT PROVEN: client_cpu (the host starved the client (" in out and " s of CPU in " in out, out[-1500:]
    assert took < 60, f"a starved client was waited on for {took:.0f} s"
    r = subprocess.run([*chaos, CLIENT], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout[-1500:]


def test_the_clients_suite_s_check_on_a_starved_busy_529_client_is_not_proven(capped: Path):
    v = check_backoff(in_cgroup(capped, CLIENT), RetryPolicy(), failure="529", fail_first=3, clients=2)
    assert not v.failures, [r.line() for r in v.failures]
    assert v.rows[0].check == "client_cpu" and v.rows[0].unproven.startswith("the host starved the client ("), v.rows[0]
    assert v.data["client_cpu"] and all(u is not None for u in v.data["client_cpu"].values())


def test_the_streams_verdicts_on_a_starved_client_are_not_proven_and_uncapped_pass(capped: Path):
    with Recorder("503", 0) as rec:
        url = rec.slot_url("s0")
        fed = run_client_command("reference", CLIENT, url, timeout_s=60)
        assert fed.ok and fed.shown and fed.cpu is not None and not fed.cpu.starved, fed
        truth = fed.shown
        t0 = time.monotonic()
        starved = run_client_command("reference", in_cgroup(capped, CLIENT), url, timeout_s=120)
        took = time.monotonic() - t0
    assert took < 30, f"a starved client command was waited on for {took:.0f} s"
    assert not starved.ok and starved.cpu is not None and starved.cpu.starved and not starved.timed_out, starved
    for v in (steady_verdict("reference", starved, truth),
              client_verdict("reference", [starved], [], truth=truth, truth_finish=None, expect_whole=True)):
        assert not v.failures, [r.line() for r in v.failures]
        assert v.rows[0].unproven.startswith("the host starved the client ("), v.rows[0]
    for v in (steady_verdict("reference", fed, truth),
              client_verdict("reference", [fed], [], truth=truth, truth_finish=None, expect_whole=True)):
        assert v.ok and not v.unproven, [r.line() for r in v.rows]
