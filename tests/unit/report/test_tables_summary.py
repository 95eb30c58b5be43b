"""Verdict and latency tables in all renderings, and the terminal summary."""
from __future__ import annotations

import csv
import io

from chaos.env.model import LatencySLA
from chaos.errors import SLOViolation
from chaos.load.records import RequestRecord
from chaos.report.summary import HEADER, SummaryCollector
from chaos.report.tables import Table, fmt, latency_table, verdict_table


def test_fmt():
    assert fmt(None) == "-" and fmt(float("nan")) == "-"
    assert fmt(True) == "yes" and fmt(0.123456) == "0.1235" and fmt(12) == "12"


def test_table_renderings_escape_and_mark_failures():
    t = Table("Verdicts <x>", ["check", "value"])
    t.add("a|b", 1.5, status="pass")
    t.add("<script>", None, status="fail")
    html = t.to_html()
    assert "&lt;script&gt;" in html and "<script>" not in html
    assert '<tr class="fail">' in html and "Verdicts &lt;x&gt;" in html
    text = t.to_text().splitlines()
    assert text[0] == "Verdicts <x>"
    assert text[1].startswith("check") and text[3].startswith("a|b")
    assert text[4].endswith("<-- FAIL") and not text[3].endswith("FAIL")
    assert len({len(line) for line in text[1:4]}) == 1  # aligned columns
    assert list(csv.reader(io.StringIO(t.to_csv()))) == [["check", "value"], ["a|b", "1.5"], ["<script>", "-"]]
    assert "| a\\|b | 1.5 |" in t.to_markdown()


def test_verdict_table_from_dicts_objects_and_violations():
    class V:
        name, stage, limit, measured, passed = "recovery", "system", 6.0, 4.0, True
    violation = SLOViolation("p99 3.1 s > 2.0 s", limit=2.0, measured=3.1)
    t = verdict_table([{"check": "fault happened", "passed": True}, V(), violation, {"name": "no result"}])
    assert [r[0] for r in t.rows] == ["fault happened", "recovery", "p99 3.1 s > 2.0 s", "no result"]
    assert [r[4] for r in t.rows] == ["PASS", "PASS", "FAIL", "?"]
    assert t.rows[2][2:4] == [2.0, 3.1]
    assert t.status == ["pass", "pass", "fail", None]


def test_latency_table_numbers_and_sla():
    recs = [RequestRecord(str(i), 1, 0.0, ttft=0.01 * i, e2e=0.1 * i, prompt_class="short") for i in range(1, 101)]
    recs += [RequestRecord("x", 1, 0.0, error="reset", prompt_class="short")]
    recs += [RequestRecord("y", 1, 0.0, ttft=0.5, e2e=9.0, prompt_class="xl")]
    t = latency_table(recs, {"short": LatencySLA(ttft_p99_s=1.0, e2e_p99_s=20.0),
                             "xl": LatencySLA(ttft_p99_s=1.0, e2e_p99_s=8.0)})
    short, xl = t.rows
    col = dict(zip(t.headers, short, strict=True))
    assert col["class"] == "short" and col["attempts"] == 101 and col["errors"] == 1
    assert abs(col["e2e p99"] - 9.9) < 1e-9 and abs(col["ttft p50"] - 0.5) < 1e-9
    assert col["within sla"] is True
    assert dict(zip(t.headers, xl, strict=True))["within sla"] is False
    assert t.status == ["pass", "fail"]


def test_summary_one_line_per_suite():
    s = SummaryCollector()
    assert s.render() == []
    s.add("recovery", scenarios=3, lost=0)
    s.count("recovery", "passed")
    s.count("recovery", "passed")
    s.worst("recovery", "max_recovery_s", 4.2)
    s.worst("recovery", "max_recovery_s", 3.0)
    s.set("network", retry_amplification=1.3456)
    s.add("recovery", lost=1)
    lines = s.render()
    assert lines == [HEADER, "recovery  scenarios=3 lost=1 passed=2 max_recovery_s=4.2",
                     "network   retry_amplification=1.346"]
