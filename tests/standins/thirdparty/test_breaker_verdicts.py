"""The breaker suite against real nginx, HAProxy and LiteLLM: its spec-vs-observed table must report
what each gateway is documented to do (shared/reference/gateways.md), not what our policy wishes.

Each gateway runs from its package (Debian's nginx and HAProxy, PyPI's litellm[proxy]) in front of
the embedded stack's simulator replicas (environments/local-nginx.yaml, local-haproxy.yaml,
local-litellm.yaml), with no admin API: the suite reads which
replica served each attempt from the fault proxies' logs. A scenario where the gateway departs
from the policy must FAIL, and its table must say what the gateway did instead.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.env import load
from tests._support import free_port_offset

ROOT = Path(__file__).resolve().parents[3]

# scenario -> what the gateway does, from its documented semantics:
#   ok: the suite's verdict (the policy's tier reached); tier: the table's observed tier
DOCUMENTED = {
    "nginx": {
        # max_fails=3 within fail_timeout=10s bans the canary for 10 s, then it gets its full share
        # back until 3 more attempts fail: drained in seconds, but never held as a rollback must be;
        # each failed POST is retried on a stable server (proxy_next_upstream http_500 non_idempotent)
        "errors-rollback": {"ok": False, "tier": "degrade", "returns_during_fault": 1, "lost": 0},
        # no latency rule in open-source nginx (least_time is nginx Plus): the stalled canary keeps its share
        "latency-degrade": {"ok": False, "tier": "none"},
    },
    "haproxy": {
        # error-limit counts CONSECUTIVE errors; the fault proxy spreads its errors evenly (1 in 200,
        # 1 in 25), so 3 in a row never happen: no move, which below the thresholds is what the policy asks
        "errors-below-degrade": {"ok": True, "tier": "none"},
        "errors-rollback": {"ok": False, "tier": "none"},
        # no latency rule either: `timeout server` (300 s here) is the only clock
        "latency-degrade": {"ok": False, "tier": "none"},
    },
    "litellm": {
        # allowed_fails 1: the 2nd failure within cooldown_time (30 s) of the first puts the canary in
        # cooldown for 30 s (the counter's TTL starts at its first failure and is not renewed: a 10 s
        # cooldown_time never saw 3 failures 1 in 25 apart at this proxy's 4-5 canary calls a second).
        # Drained some 11 s into the fault, back only after it: a degrade, never the rollback held
        # until reset. Each failed call is retried on a deployment not in cooldown (num_retries 2)
        "errors-rollback": {"ok": False, "tier": "degrade", "lost": 0},
        # simple-shuffle has no latency rule; `timeout` (300 s here) is the only clock
        "latency-degrade": {"ok": False, "tier": "none"},
        # (errors-below-degrade is left out: whether 2 failures 1 in 200 apart fall within 30 s depends on the
        # canary's rate, which here is the proxy's own CPU limit)
    },
}


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_verdict_table_reports_what_the_gateway_does(gateway_kind, tmp_path, monkeypatch):
    # a stack of its own on ports free now: beside any `local` stack a developer keeps running, and
    # beside the other tests of the lane on the other xdist worker
    offset = str(free_port_offset((ROOT / "environments" / f"local-{gateway_kind}.yaml").read_text()))
    monkeypatch.setenv("CHAOS_PORT_OFFSET", offset)
    env = load(f"local-{gateway_kind}")
    tables = Path(env.state_dir) / "breaker-tables.jsonl"
    tables.unlink(missing_ok=True)
    expected = DOCUMENTED[gateway_kind]
    select = " or ".join(expected)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/breaker", "--env", f"local-{gateway_kind}", "-k", select,
         "-q", "-p", "no:cacheprovider", "-o", "addopts=", f"--alluredir={tmp_path / 'results'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=1100, env={**os.environ, "CHAOS_PORT_OFFSET": offset})
    out = proc.stdout[-4000:] + proc.stderr[-2000:]
    assert tables.exists(), f"the suite wrote no verdict table:\n{out}"
    got = {row["scenario"]: row for row in map(json.loads, tables.read_text().splitlines())}
    assert sorted(got) == sorted(expected), f"scenarios judged: {sorted(got)}\n{out}"
    for name, want in expected.items():
        row, seen = got[name], got[name]["observed"]
        assert row["gateway"] == gateway_kind
        assert row["ok"] is want["ok"], f"{name}: verdict ok={row['ok']}, documented {want['ok']}: {row['rows']}"
        assert seen["tier"] == want["tier"], f"{name}: observed tier {seen['tier']}, documented {want['tier']}: {seen}"
        if "returns_during_fault" in want:
            assert seen["returns_during_fault"] >= want["returns_during_fault"], f"{name}: {seen}"
        if "lost" in want:
            assert seen["lost"] == want["lost"], f"{name}: {seen}"
        if not want["ok"]:  # a departure from the policy is a failed test whose table says how
            tier = next(r for r in row["rows"] if r["check"] == "tier")
            assert tier["ok"] is False and tier["measured"].startswith(want["tier"]), tier
    failed = sum(1 for w in expected.values() if not w["ok"])
    assert f"{failed} failed" in proc.stdout, out
