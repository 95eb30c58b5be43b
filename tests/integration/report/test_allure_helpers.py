"""Allure helpers as seen in real allure-pytest results: phases, labels, attachments, secrets, results files."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.env.model import Environment
from chaos.report.results_dir import CATEGORIES, write_categories, write_environment_properties

SECRET_KEY = "sk-live-0123456789abcdef"
HMAC_SECRET = "hmac-secret-9f8e7d6c5b4a"

INNER = r'''
import json, os
from chaos.observe.timeline import Timeline
from chaos.report import allure as rep
from chaos.report.tables import Table

def test_phases(tmp_path):
    rep.labels(epic="Resilience", feature="Recovery", story="SIGKILL", tags=["smoke"])
    rep.register_secret("SECRET_KEY")
    ticks = iter([100.0, 101.5, 102.0, 105.25])
    tl = Timeline(clock=lambda: next(ticks))
    with rep.phase("steady state", tl):
        rep.attach_text("token=SECRET_KEY in a log line", "log")
    with rep.phase("inject", tl, t0=100.0, fault="kill"):
        t = Table("verdicts", ["check", "ok"]); t.add("recovery", True)
        rep.attach_table(t)
        rep.attach_json({"key": "SECRET_KEY", "n": 1}, "evidence")
        rep.attach_log_tail("\n".join(f"line {i}" for i in range(500)), "replica log", lines=3)
        rep.attach_png(b"\x89PNG\r\n\x1a\nfake", "timeline")
    tl.dump(os.environ["TL_OUT"])

def test_failing_phase():
    with rep.phase("verify"):
        assert 1 == 2, "p99 too high"
'''


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("allure")
    (base / "test_inner.py").write_text(INNER.replace("SECRET_KEY", SECRET_KEY), encoding="utf-8")
    out, tl = base / "results", base / "timeline.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
         f"--alluredir={out}", "test_inner.py"],
        cwd=base, capture_output=True, text=True, timeout=120, env={**os.environ, "TL_OUT": str(tl)})
    assert "1 failed, 1 passed" in proc.stdout, proc.stdout + proc.stderr
    return out, tl


def _result(out: Path, name: str) -> dict:
    for f in out.glob("*-result.json"):
        d = json.loads(f.read_text())
        if d["name"] == name:
            return d
    raise AssertionError(f"no result {name} in {out}")


def test_phase_steps_carry_start_and_end_and_land_on_the_timeline(results):
    out, tl_path = results
    d = _result(out, "test_phases")
    steps = d["steps"]
    assert [s["name"] for s in steps] == ["steady state", "inject  (t+2.0 s)"]
    params = {p["name"]: p["value"] for p in steps[1]["parameters"]}
    assert params["start"] == "1970-01-01T00:01:42.000Z (102.000)"
    assert params["end"] == "1970-01-01T00:01:45.250Z (105.250, 3.25 s)"
    events = json.loads(tl_path.read_text())["events"]
    assert [(e["kind"], e["name"], e["t"]) for e in events] == [("phase", "steady state", 100.0), ("phase", "inject", 102.0)]
    assert events[1]["detail"] == {"fault": "kill", "end": 105.25, "duration_s": 3.25, "status": "passed"}
    labels = {(lb["name"], lb["value"]) for lb in d["labels"]}
    assert {("epic", "Resilience"), ("feature", "Recovery"), ("story", "SIGKILL"), ("tag", "smoke")} <= labels


def test_failed_phase_is_a_failed_step(results):
    out, _ = results
    step = _result(out, "test_failing_phase")["steps"][0]
    assert step["name"] == "verify" and step["status"] == "failed"


def test_attachments_are_typed_trimmed_and_free_of_secrets(results):
    out, _ = results
    steps = _result(out, "test_phases")["steps"]
    atts = {a["name"]: a for s in steps for a in s.get("attachments", [])}
    assert {a["type"] for a in atts.values()} >= {"text/html", "text/csv", "application/json", "image/png", "text/plain"}
    assert set(atts) == {"log", "verdicts", "verdicts (csv)", "evidence", "replica log (last 3 lines)", "timeline"}
    assert (out / atts["replica log (last 3 lines)"]["source"]).read_text() == "line 497\nline 498\nline 499"
    assert "***" in (out / atts["log"]["source"]).read_text()
    for f in out.iterdir():
        assert SECRET_KEY.encode() not in f.read_bytes(), f"secret leaked into {f.name}"


def _env_with_secrets(monkeypatch: pytest.MonkeyPatch) -> Environment:
    monkeypatch.setenv("CHAOS_TEST_HMAC", HMAC_SECRET)
    return Environment.model_validate({
        "name": "staging", "endpoints": {"api": "https://user:pw-in-url@gw.example:8443/v1", "api_key": SECRET_KEY},
        "gateway": {"admin_token": "admin-token-abcdef"}, "breaker": {"hmac_key_env": "CHAOS_TEST_HMAC"},
        "targets": [{"name": "a", "kind": "docker", "port": 8000, "image": "vllm", "env": {"HF_TOKEN": "hf_abcdefgh"}}],
        "slas": {"latency": {"short": {"ttft_p99_s": 0.5, "e2e_p99_s": 2.0}}},
    })


def test_environment_properties_never_hold_secrets(tmp_path, monkeypatch):
    path = write_environment_properties(tmp_path / "res", _env_with_secrets(monkeypatch), {"run id": "r:1"})
    text = path.read_text()
    props = dict(line.split("=", 1) for line in text.splitlines())
    assert props["environment"] == "staging"
    assert props["api"] == "https://gw.example:8443/v1"
    assert props["sla.latency.short"] == "ttft p99 0.5 s, e2e p99 2 s"
    assert props["breaker.hmac_signing"] == "on"
    assert props["run\\ id"] == "r:1"
    for secret in (SECRET_KEY, HMAC_SECRET, "admin-token-abcdef", "pw-in-url", "hf_abcdefgh", "CHAOS_TEST_HMAC"):
        assert secret not in text


# status, message, expected category (None = no category)
CASES = [
    ("failed", "chaos.errors.SLOViolation: recovery 75 s > 60 s", "SLA breaches"),
    ("failed", "AssertionError: p99 too high\nassert 3 < 2", "Failed checks (plain assertions)"),
    ("broken", "chaos.errors.FaultNotEffective: fault kill: replica still serving", "Fault not effective"),
    ("broken", "chaos.errors.StackError: toxiproxy did not start", "Harness errors"),
    ("broken", "KeyError: 'x'", "Broken tests"),
    ("broken", "KeyError: 'ABORTED'", "Broken tests"),
    ("broken", "ABORTED: error rate 80.00% over the last 10 s (212 requests), over safety.abort.error_rate 30%",
     "Aborted experiments"),
    ("broken", "STOPPED: stopped by chaos stop (root@ci, pid 4242)", "Stopped experiments"),
    ("skipped", "INCONCLUSIVE: 0.50% failures (random spread) stay under the 1.0% tier", "Inconclusive"),
    ("skipped", "no baseline recorded", None),
    ("passed", None, None),
]


def _java_match(status: str, message: str | None) -> list[str]:
    return [c["name"] for c in CATEGORIES if status in c["matchedStatuses"]
            and re.fullmatch(c["messageRegex"], message or "", re.DOTALL) is not None]


@pytest.mark.parametrize("status,message,expected", CASES)
def test_categories_are_disjoint_under_full_match_semantics(status, message, expected):
    names = _java_match(status, message)
    assert len(names) == (expected is not None)
    if expected:
        assert names[0].startswith(expected)


def test_categories_match_the_same_way_in_javascript(tmp_path):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not installed")
    script = ("const cats = JSON.parse(process.argv[1]); const cases = JSON.parse(process.argv[2]);"
              "console.log(JSON.stringify(cases.map(([s, m]) => cats.filter(c => c.matchedStatuses.includes(s)"
              " && new RegExp(c.messageRegex).test(m || '')).map(c => c.name))));")
    cats = json.loads(write_categories(tmp_path).read_text())
    proc = subprocess.run([node, "-e", script, json.dumps(cats), json.dumps(CASES)], capture_output=True, text=True,
                          timeout=30, check=True)
    got = json.loads(proc.stdout)
    for (_status, message, expected), names in zip(CASES, got, strict=True):
        assert len(names) == (expected is not None), (message, names)
        if expected:
            assert names[0].startswith(expected)
