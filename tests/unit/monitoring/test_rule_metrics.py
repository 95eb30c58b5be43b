"""Which metrics each alert reads (a PromQL tokenizer), what a metrics page exports, and the probe's line per
alert that reads a metric no scrape target exports (the pages answered by a stub: no sockets here)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from chaos.env import parse
from chaos.env_check import rule_metrics
from chaos.env_check.http import Answer
from chaos.env_check.promql import metric_names
from chaos.env_check.rule_metrics import check_rule_metrics, exported_names, read_rules, scrape_pages

RULES = Path(__file__).resolve().parents[3] / "examples" / "monitoring" / "rules" / "llm-serving.rules.yml"


@pytest.mark.parametrize("expr, names", [
    ('sum by (pool) (rate(chaos_gateway_requests_total{outcome="error"}[15s]))', ["chaos_gateway_requests_total"]),
    ("histogram_quantile(0.99, sum by (le, instance) (rate(vllm:time_to_first_token_seconds_bucket[30s]))) >= 2",
     ["vllm:time_to_first_token_seconds_bucket"]),
    ('a{x="not_a_metric"} / on (pool) group_left (zone) b offset 5m', ["a", "b"]),
    ("sum(rate(x[5m])) without (instance) > bool 0.5 and y @ start()", ["x", "y"]),
    ('{__name__="by_name", job="j"} unless {__name__=~"re.*"} # comment_metric\n+ count_values("le", c)',
     ["by_name", "c"]),
    ("min_over_time((deriv(m[5m]) * 3600 / m)[10m:30s]) > 1e-3 and time() - inf < nan", ["m"]),
    ('label_replace(up, "dst", "$1", "src", "(.*)") or vector(1)', ["up"]),
])
def test_the_metrics_an_expression_reads(expr: str, names: list[str]) -> None:
    assert metric_names(expr) == names


def test_a_page_exports_its_samples_and_its_declared_families() -> None:
    page = (b"# HELP chaos_gateway_oom_total OOM answers\n# TYPE chaos_gateway_oom_total counter\n"
            b'# TYPE vllm:ttft histogram\nvllm:ttft_bucket{le="1"} 2\nvllm:ttft_count 2\nprocess_start_time_seconds 1.7e9\n')
    names = exported_names(page)
    assert {"chaos_gateway_oom_total", "vllm:ttft_bucket", "vllm:ttft_sum", "process_start_time_seconds"} <= names
    assert "chaos_gateway_requests_total" not in names


def test_a_recording_rule_stands_for_what_it_reads(tmp_path: Path) -> None:
    f = tmp_path / "r.yml"
    f.write_text("groups:\n- name: g\n  rules:\n  - record: pool:errors:rate\n    expr: sum(rate(gw_errors_total[1m]))\n"
                 "  - alert: Errors\n    expr: pool:errors:rate > 1 and on() vllm:num_requests_running > 0\n")
    env = SimpleNamespace(monitoring=SimpleNamespace(rule_files=[str(f)], prometheus=SimpleNamespace(embedded=True)),
                          targets=[SimpleNamespace(host="10.0.0.1", port=8000)], endpoints=SimpleNamespace(gateway_admin=None))
    assert [r.name for r in read_rules([str(f)])] == ["pool:errors:rate", "Errors"]
    page = Answer(200, b"vllm:num_requests_running 1\n")
    lines = _probe(env, {"http://10.0.0.1:8000/metrics": page})
    assert [(p.what, p.ok) for p in lines] == [("alert rule Errors", False)]
    assert lines[0].detail.startswith("reads gw_errors_total, which no scrape target exports"), lines[0]


def _probe(env: object, pages: dict[str, Answer]) -> list[rule_metrics.Probe]:
    real = rule_metrics.get
    rule_metrics.get = lambda url, timeout, headers=None: pages.get(url, Answer(None, error="refused"))  # type: ignore[assignment]
    try:
        return check_rule_metrics(env, 1.0)
    finally:
        rule_metrics.get = real


def _env(tmp_path: Path, prometheus: str = "{embedded: true}") -> object:
    text = (f"name: t\nendpoints: {{api: 'http://10.0.0.9:1', gateway_admin: 'http://10.0.0.9:9100'}}\n"
            "targets: [{name: r1, kind: process, host: 10.0.0.1, port: 8000, command: [x]},\n"
            "          {name: r2, kind: process, host: 10.0.0.2, port: 8000, command: [x]}]\n"
            f"monitoring:\n  prometheus: {prometheus}\n  rule_files: [{RULES}]\n")
    return parse(text, tmp_path / "e.yaml", {})


VLLM_PAGE = Answer(200, b'vllm:time_to_first_token_seconds_bucket{le="1"} 1\nvllm:kv_cache_usage_perc 0.1\n'
                        b"process_resident_memory_bytes 1e9\nprocess_start_time_seconds 1.7e9\n")


def test_each_shipped_alert_on_the_reference_gateways_counters_fails_on_a_team_gateway(tmp_path: Path) -> None:
    team_gateway = Answer(200, b"# TYPE http_requests_total counter\nhttp_requests_total 5\n")
    lines = _probe(_env(tmp_path), {"http://10.0.0.1:8000/metrics": VLLM_PAGE, "http://10.0.0.2:8000/metrics": VLLM_PAGE,
                                    "http://10.0.0.9:9100/metrics": team_gateway})
    fails = {p.what: p.detail for p in lines if not p.ok}
    assert fails.keys() == {"alert rule LLMErrorRateDegrade", "alert rule LLMErrorRateRollback",
                            "alert rule LLMLongContextFailureRate", "alert rule LLMOOMBurst"}, lines
    assert fails["alert rule LLMOOMBurst"].startswith("reads chaos_gateway_oom_total, which no scrape target exports")
    assert fails["alert rule LLMLongContextFailureRate"].endswith(
        "(looked in the pages of vllm 10.0.0.1:8000, vllm 10.0.0.2:8000, gateway 10.0.0.9:9100): it can never fire")
    assert [p.detail for p in lines if p.ok] == ["5 of 9 alerts read only exported metrics"]


def test_a_page_that_does_not_answer_is_said_and_nothing_read_is_no_verdict_on_the_rules(tmp_path: Path) -> None:
    some = _probe(_env(tmp_path), {"http://10.0.0.1:8000/metrics": VLLM_PAGE})
    assert [p.what for p in some if not p.ok][:2] == ["scrape target vllm", "scrape target gateway"]
    assert "2 page(s) did not answer" in next(p.detail for p in some if p.what == "alert rule LLMOOMBurst")
    none = _probe(_env(tmp_path), {})
    assert none[-1].what == "alert rule metrics" and not none[-1].ok and "cannot tell" in none[-1].detail
    assert not any(p.what.startswith("alert rule LLM") for p in none)


def test_a_teams_prometheus_is_asked_for_the_names_it_has(tmp_path: Path) -> None:
    names = Answer(200, b'{"status": "success", "data": ["up", "vllm:kv_cache_usage_perc", "chaos_gateway_oom_total"]}')
    lines = _probe(_env(tmp_path, "{url: 'http://10.0.0.5:9090'}"),
                   {"http://10.0.0.5:9090/api/v1/label/__name__/values": names})
    fails = {p.what: p.detail for p in lines if not p.ok}
    assert "alert rule LLMOOMBurst" not in fails and "alert rule LLMReplicaDown" not in fails
    assert fails["alert rule LLMReplicaRestarted"].startswith("reads process_start_time_seconds, which no scrape target")
    assert "(looked in the series of Prometheus http://10.0.0.5:9090)" in fails["alert rule LLMReplicaRestarted"]


def test_the_probe_reads_the_pages_the_embedded_prometheus_scrapes(tmp_path: Path) -> None:
    from chaos.stack.monitoring import scrape_jobs

    env = _env(tmp_path)
    assert scrape_pages(env) == scrape_jobs(env) == {"vllm": ["10.0.0.1:8000", "10.0.0.2:8000"],
                                                     "gateway": ["10.0.0.9:9100"]}


def test_each_shipped_alert_says_in_a_comment_which_metrics_it_needs() -> None:
    """The `needs:` comment above each shipped alert names every metric its expression reads (and so stays true)."""
    for path in sorted(RULES.parent.glob("*.rules.yml")):
        lines = path.read_text().splitlines()
        rules = {r.name: r for r in read_rules([str(path)])}
        for i, line in enumerate(lines):
            if "- alert: " not in line:
                continue
            name, comment = line.split("- alert: ")[1].strip(), []
            for above in reversed(lines[:i]):
                if not above.strip().startswith("#"):
                    break
                comment.insert(0, above.strip().lstrip("# "))
            needs = " ".join(comment[next(k for k, c in enumerate(comment) if c.startswith("needs: ")):])
            assert all(m in needs for m in rules[name].reads), (path.name, name, needs)
