"""The `monitoring:` section: bad input is one line naming file:line and field; rule files are taken
from the file's folder; `chaos env check` names each expected alert no rule file defines, and
`--probe` checks that every rule file loads."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from chaos.env import load, parse
from chaos.errors import ConfigError
from tests.integration.cli.test_cli import chaos

HEAD = "name: t\nendpoints: {api: 'http://127.0.0.1:1'}\nmonitoring:\n"
RULES = Path(__file__).resolve().parents[3] / "examples" / "monitoring" / "rules" / "llm-serving.rules.yml"


def refused(text: str) -> str:
    with pytest.raises(ConfigError) as e:
        parse(HEAD + text, "env.yaml", environ={})
    assert len(str(e.value).splitlines()) == 1, str(e.value)
    return str(e.value)


@pytest.mark.parametrize("text, says", [
    ("  prometheus: {embedded: true, url: 'http://p:9090'}\n  rule_files: [r.yml]\n",
     "env.yaml:4: monitoring.prometheus: expected exactly one of 'url' or 'embedded: true'"),
    ("  prometheus: {}\n", "env.yaml:4: monitoring.prometheus: expected exactly one of 'url' or 'embedded: true'"),
    ("  prometheus: {embedded: true}\n", "an embedded prometheus needs 'rule_files'"),
    ("  prometheus: {url: 'http://p:9090'}\n  alertmanager: {embedded: true}\n",
     "an embedded alertmanager needs an embedded prometheus"),
    ("  prometheus: {url: 'http://p:9090'}\n  expect:\n    gpu-reset: {fire: [A]}\n",
     "expect: 'gpu-reset' is no fault kind or scenario (expected one of gpu-driver-reset"),
    ("  prometheus: {url: 'http://p:9090'}\n  expect:\n    errors-rollback: {fire: []}\n",
     "monitoring.expect.errors-rollback.fire"),
    ("  prometheus: {url: 'http://p:9090'}\n  expect:\n    errors-rollback: {fire: [A], clear_within_s: 0}\n",
     "monitoring.expect.errors-rollback.clear_within_s"),
    ("  prometheus: {url: 'http://p:9090', scrape_every: 1}\n", "monitoring.prometheus.scrape_every"),
])
def test_a_bad_monitoring_section_is_one_line_naming_the_field(text: str, says: str) -> None:
    assert says in refused(text)


def test_rule_files_are_taken_from_the_environment_files_folder(tmp_path: Path) -> None:
    f = tmp_path / "envs" / "e.yaml"
    f.parent.mkdir()
    f.write_text(HEAD + "  prometheus: {embedded: true}\n  rule_files: [../rules/a.yml]\n")
    assert load(str(f), environ={}).monitoring.rule_files == [str(tmp_path / "rules" / "a.yml")]


def test_the_local_environment_expects_alerts_its_rules_define() -> None:
    mon = load("local", environ={}).monitoring
    assert mon is not None and Path(mon.rule_files[0]) == RULES
    assert mon.expectation("errors-rollback").fire == ["LLMErrorRateDegrade", "LLMErrorRateRollback"]
    assert mon.expectation(None) is None and mon.expectation("nccl-rank-freeze") is None


def test_env_check_names_each_expected_alert_no_rule_file_defines(tmp_path: Path) -> None:
    shutil.copy(RULES, tmp_path / "rules.yml")
    (tmp_path / "e.yaml").write_text(HEAD + "  prometheus: {embedded: true}\n  rule_files: [rules.yml]\n"
                                     "  expect:\n    errors-rollback: {fire: [LLMErrorRateRollback, LLMErrorRate5xx]}\n"
                                     "    gpu-driver-reset: {fire: [LLMReplicaRestarted], allow: [Nope]}\n")
    r = chaos("env", "check", "--env", str(tmp_path / "e.yaml"))
    assert r.returncode == 1, r.stdout + r.stderr
    fails = [line for line in r.stdout.splitlines() if line.startswith("FAIL")]
    assert len(fails) == 2, r.stdout
    assert "monitoring.expect.errors-rollback.fire: alert 'LLMErrorRate5xx' is in no rule file" in fails[0]
    assert "monitoring.expect.gpu-driver-reset.allow: alert 'Nope' is in no rule file" in fails[1]
    assert "Traceback" not in r.stderr


def test_env_check_probe_says_whether_each_rule_file_loads(tmp_path: Path) -> None:
    if shutil.which("promtool") is None:
        pytest.skip("promtool unavailable (Debian package prometheus)")
    (tmp_path / "good.yml").write_text(RULES.read_text())
    (tmp_path / "bad.yml").write_text("groups:\n  - name: g\n    rules:\n      - alert: X\n        expr: 'rate(x[5m'\n")
    (tmp_path / "e.yaml").write_text(HEAD + "  prometheus: {url: 'http://127.0.0.1:9'}\n"
                                     "  rule_files: [good.yml, bad.yml]\n")
    r = chaos("env", "check", "--probe", "--timeout", "0.5", "--env", str(tmp_path / "e.yaml"))
    lines = r.stdout.splitlines()
    assert any(line.startswith("ok    rule file:") and "good.yml" in line and "9 rules" in line for line in lines), r.stdout
    assert any(line.startswith("FAIL  rule file:") and "bad.yml" in line and "promtool check rules failed" in line
               for line in lines), r.stdout
    assert any(line.startswith("FAIL  prometheus: http://127.0.0.1:9") for line in lines), r.stdout
    assert r.returncode == 1
