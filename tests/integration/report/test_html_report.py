"""End to end: pytest + allure-pytest -> results -> Allure 3 HTML -> headless Chromium lists the tests."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.cli import main as chaos_main
from chaos.report import browser, html
from chaos.report.results_dir import write_categories

TINY = '''
import pytest
from chaos.errors import FaultNotEffective, SLOViolation, StackError
from chaos.report import allure as rep

def test_recovery_within_sla():
    rep.labels(epic="Resilience", feature="Recovery", story="SIGKILL")
    with rep.phase("steady state"):
        pass

def test_breaker_trips_late():
    raise SLOViolation("degrade 4.1 s after the crossing > allowance 2.0 s", limit=2.0, measured=4.1)

def test_plain_assert():
    assert 3 < 2, "p99 above the limit"

def test_fault_never_took_hold():
    raise FaultNotEffective("replica still serving", fault="kill")

def test_stack_did_not_start():
    raise StackError("toxiproxy did not start")

def test_unexpected():
    {}["x"]
'''
EXPECTED = {
    "test_recovery_within_sla": ("passed", None),
    "test_breaker_trips_late": ("failed", "SLA breaches"),
    "test_plain_assert": ("failed", "Failed checks"),
    "test_fault_never_took_hold": ("broken", "Fault not effective"),
    "test_stack_did_not_start": ("broken", "Harness errors"),
    "test_unexpected": ("broken", "Broken tests"),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("e2e")
    (base / "test_tiny.py").write_text(TINY, encoding="utf-8")
    out = base / "allure-results"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                           f"--alluredir={out}", "test_tiny.py"], cwd=base, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))
    assert "5 failed, 1 passed" in proc.stdout, proc.stdout + proc.stderr
    write_categories(out)
    return out


def test_report_builds_lists_tests_in_chromium_and_keeps_history(results, allure_cli, chromium, tmp_path):
    hist = tmp_path / "history.jsonl"
    out = tmp_path / "report"
    index = html.generate(results, out, history=hist, cli=allure_cli)
    assert index == out / "index.html"
    html.generate(results, out, history=hist, cli=allure_cli)   # a second run: replaces, extends history
    assert len(hist.read_text().splitlines()) == 2

    names = browser.listed_tests(out, chromium=chromium)
    assert sorted(names) == sorted(EXPECTED)

    categories = {}
    for f in (out / "data" / "test-results").glob("*.json"):
        d = json.loads(f.read_text())
        categories[d["name"]] = (d["status"], [c["name"] for c in d.get("categories") or []])
    for name, (status, category) in EXPECTED.items():
        got_status, got = categories[name]
        assert got_status == status, name
        assert (got[0].startswith(category) if category else got == []), (name, got)

    png = browser.screenshot(out, tmp_path / "shot.png", size=(1000, 700), chromium=chromium)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24]) == (1000, 700)


def test_chaos_report_command(results, allure_cli, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where the default history file would go
    rc = chaos_main(["report", "--results", str(results), "--out", str(tmp_path / "r"), "--no-history"])
    assert rc == 0
    assert capsys.readouterr().out.strip() == f"report: {tmp_path / 'r' / 'index.html'}"
    assert not (tmp_path / ".state").exists()


def test_generate_refuses_to_replace_a_foreign_directory(results, allure_cli, tmp_path):
    precious = tmp_path / "docs"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(html.ConfigError, match="not an Allure report"):
        html.generate(results, precious, cli=allure_cli)
    assert (precious / "notes.txt").read_text() == "keep me"
