"""Backoff compliance end to end: real clients (callables and shell commands) against the recorder."""
from __future__ import annotations

import json
import shutil
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from chaos.cli import main
from chaos.env.model import RetryPolicy
from chaos.resilience.client import ResilientClient
from chaos.verify.backoff_run import check_backoff

REPO = Path(__file__).resolve().parents[3]
CLIENTS = REPO / "examples" / "clients"
POLICY = RetryPolicy(min_interval_s=0.5, multiplier=2.0, max_interval_s=2.0, max_attempts=4, jitter=0.2, deadline_s=10)
ENV_YAML = """name: fast
endpoints: {api: "http://127.0.0.1:1"}
retry: {min_interval_s: 0.5, multiplier: 2.0, max_interval_s: 2.0, max_attempts: 4, jitter: 0.2, deadline_s: 10}
"""
RULES_OK = ("retries", "min_interval", "exponential", "jitter", "cap", "gives_up.attempts", "gives_up.deadline", "non_retryable")


def reference(url: str) -> None:
    ResilientClient(url, POLICY, timeout_s=1.0).chat("hi")


def fixed_loop(wait: float, attempts: int):
    """A client that retries on any failure after a fixed wait: no growth, no jitter, retries 400s."""
    def run(url: str) -> None:
        req = urllib.request.Request(url + "/v1/chat/completions", data=b'{"model":"sim-model"}',
                                     headers={"x-request-id": "fixed", "Content-Type": "application/json"})
        for _ in range(attempts):
            try:
                urllib.request.urlopen(req, timeout=1).read()
                return
            except Exception:
                time.sleep(wait)
    return run


def failing(v) -> set[str]:
    return {r.check for r in v.failures}


def unproven_jitter_skips(v) -> None:
    """Every other rule has been asserted; jitter "not proven" (the clients' spread no wider than the
    fixed-wait control's: a loaded machine) is the project's skipped step, with its numbers, never a pass."""
    row = v.row("jitter")
    if row.unproven:
        pytest.skip(f"jitter not proven on this machine now: {row.detail}")


def test_reference_client_passes_every_rule() -> None:
    v = check_backoff(reference, POLICY, failure="503", fail_first=2, clients=6, time_limit_s=12)
    assert v.ok, [r.line() for r in v.failures] + [r.line() for r in v.rows]
    assert all(v.row(rule).ok is True for rule in RULES_OK if rule != "jitter")
    unproven_jitter_skips(v)
    assert v.row("jitter").ok is True
    assert v.row("retry_after").ok is None


def test_naive_100ms_loop_fails_for_the_right_reasons() -> None:
    v = check_backoff(fixed_loop(0.1, 10), POLICY, failure="429", retry_after=0.2, fail_first=2, clients=4,
                      time_limit_s=12)
    assert {"min_interval", "exponential", "gives_up.attempts", "retry_after", "non_retryable"} <= failing(v)
    assert v.row("cap").ok is True
    assert v.row("min_interval").measured < 0.2


def test_fixed_600ms_without_jitter_fails_growth_and_jitter_only() -> None:
    v = check_backoff(fixed_loop(0.6, 4), POLICY, failure="503", fail_first=2, clients=6, time_limit_s=12)
    assert v.row("min_interval").ok is True
    assert {"exponential", "non_retryable"} <= failing(v)
    # Lockstep: a FAIL when the spread is under 2 %; on a loaded machine scheduler noise alone spreads the
    # waits wider (cv 0.02-0.05 seen at load 5-10), and then the rule cannot tell, so it is not proven. Never ok.
    jitter = v.row("jitter")
    assert jitter.ok is False or jitter.unproven, jitter.line()


@pytest.mark.slow
@pytest.mark.parametrize("failure, retry_after", [("429", 0.2), ("429", 1.2), ("529", 1.2), ("reset", None),
                                                  ("timeout", None), ("stream-cut", None), ("500", None)])
def test_reference_client_passes_under_each_failure(failure: str, retry_after: float | None) -> None:
    v = check_backoff(reference, POLICY, failure=failure, retry_after=retry_after, fail_first=2, clients=8,
                      time_limit_s=15)
    assert v.ok, [r.line() for r in v.failures] + [r.line() for r in v.rows]
    if retry_after is not None:
        assert v.row("retry_after").ok is True
    unproven_jitter_skips(v)


def gives_up_at_once(url: str) -> None:
    """Treats busy as down: one attempt, then it would go to another endpoint (or give up)."""
    ResilientClient(url, RetryPolicy(**{**POLICY.model_dump(), "max_attempts": 1}), timeout_s=1.0).chat("hi")


def test_reference_client_backs_off_on_a_busy_529() -> None:
    v = check_backoff(reference, POLICY, failure="529", fail_first=2, clients=6, time_limit_s=12)
    assert v.ok, [r.line() for r in v.failures] + [r.line() for r in v.rows]
    row = v.row("overload")
    assert row.ok is True and row.detail.startswith("backs off on 529"), row.line()
    assert row.measured >= POLICY.min_interval_s and v.row("exponential").ok is True
    unproven_jitter_skips(v)


def test_a_client_retrying_a_529_after_100ms_hammers_on_it() -> None:
    v = check_backoff(fixed_loop(0.1, 10), POLICY, failure="529", fail_first=2, clients=4, time_limit_s=12,
                      phases=("retry", "give_up"))
    assert {"min_interval", "exponential", "overload"} <= failing(v)
    assert v.row("overload").detail.startswith("hammers on 529"), v.row("overload").line()


def test_a_client_that_fails_over_on_a_529_treats_busy_as_down() -> None:
    v = check_backoff(gives_up_at_once, POLICY, failure="529", fail_first=2, clients=2, time_limit_s=12,
                      phases=("retry", "give_up"))
    assert {"retries", "overload"} <= failing(v)
    assert v.row("overload").detail.startswith("treats 529 as down: 3/3 logical requests never retried"), \
        v.row("overload").line()


@pytest.fixture
def env_file(tmp_path: Path) -> str:
    p = tmp_path / "fast.yaml"
    p.write_text(ENV_YAML, encoding="utf-8")
    return str(p)


def test_naive_shell_loop_fails_through_the_cli(env_file: str, capsys: pytest.CaptureFixture[str]) -> None:
    if not shutil.which("curl"):
        pytest.skip("curl not installed")
    rc = main(["backoff-check", "--client-cmd", f"sh {CLIENTS / 'naive_retry.sh'} {{base_url}}", "--env", env_file,
               "--clients", "2", "--fail-first", "2"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "FAIL: min_interval, exponential" in out and "non_retryable" in out


def test_naive_shell_loop_fails_a_529_through_the_cli(env_file: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A client that retries a 529 after 100 ms fails `chaos backoff-check`, named as hammering on it."""
    if not shutil.which("curl"):
        pytest.skip("curl not installed")
    out_json = tmp_path / "v.json"
    rc = main(["backoff-check", "--client-cmd", f"sh {CLIENTS / 'naive_retry.sh'} {{base_url}}", "--env", env_file,
               "--clients", "2", "--fail-first", "2", "--failure", "529", "--json", str(out_json)])
    out = capsys.readouterr().out
    assert rc == 1 and "FAIL: min_interval, exponential" in out, out
    rows = {r["check"]: r for r in json.loads(out_json.read_text())["rows"]}
    assert rows["overload"]["ok"] is False and rows["overload"]["detail"].startswith("hammers on 529"), rows


def test_curl_that_never_retries_a_503_does_not_pass(env_file: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`curl --retry 4` POSTing a JSON body sends one attempt and stops at the 503 (curl 7.88 here): every
    interval rule is then n/a, which once printed "PASS: every rule holds"."""
    if not shutil.which("curl"):
        pytest.skip("curl not installed")
    cmd = ("curl -s -o /dev/null --retry 4 -H 'content-type: application/json' "
           "-d '{\"model\":\"sim-model\",\"prompt\":\"x\"}' {base_url}/v1/completions")
    rc = main(["backoff-check", "--client-cmd", cmd, "--env", env_file, "--clients", "2", "--time-limit", "10"])
    out = capsys.readouterr().out
    assert rc == 1, out
    assert "FAIL: retries" in out and "PASS" not in out
    assert "0/3" in out, out  # 2 retry-phase copies and the give-up copy, none retried


@pytest.mark.slow
def test_reference_python_script_passes_through_the_cli(env_file: str, capsys: pytest.CaptureFixture[str]) -> None:
    cmd = f"{sys.executable} {CLIENTS / 'reference_client.py'} {{base_url}} --timeout 1 --env {env_file}"
    rc = main(["backoff-check", "--client-cmd", cmd, "--env", env_file, "--clients", "8", "--fail-first", "2",
               "--time-limit", "20"])
    out = capsys.readouterr().out
    if rc == 1 and "NOT PROVEN: jitter (" in out and "FAIL" not in out:
        pytest.skip(f"jitter not proven on this machine now: {out.splitlines()[-1]}")
    assert rc == 0, out
    assert "PASS: every rule that could be judged holds (n/a: retry_after)" in out  # no 429 was sent


@pytest.mark.slow
def test_reference_python_script_backs_off_on_a_529_through_the_cli(env_file: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    cmd = f"{sys.executable} {CLIENTS / 'reference_client.py'} {{base_url}} --timeout 1 --env {env_file}"
    rc = main(["backoff-check", "--client-cmd", cmd, "--env", env_file, "--clients", "8", "--fail-first", "2",
               "--failure", "529", "--time-limit", "20"])
    out = capsys.readouterr().out
    if rc == 1 and "NOT PROVEN: jitter (" in out and "FAIL" not in out:
        pytest.skip(f"jitter not proven on this machine now: {out.splitlines()[-1]}")
    assert rc == 0, out
    assert "PASS: every rule that could be judged holds (n/a: retry_after)" in out  # overload judged, and held


@pytest.mark.slow
def test_node_client_passes_through_the_command_path() -> None:
    if not shutil.which("node"):
        pytest.skip("node not installed")
    cmd = f"node {CLIENTS / 'node_client.mjs'} {{base_url}} --min 0.5 --max 2 --attempts 4 --deadline 10 --timeout 1"
    v = check_backoff(cmd, POLICY, failure="503", fail_first=2, clients=8, time_limit_s=20)
    assert v.ok, [r.line() for r in v.failures] + [r.line() for r in v.rows]
    unproven_jitter_skips(v)


@pytest.mark.parametrize("args, message", [
    (["--client-cmd", "curl http://x"], "must contain {base_url}"),
    (["--client-cmd", "x {base_url}", "--failure", "418"], "--failure"),
    (["--client-cmd", "x {base_url}", "--fail-first", "0"], "--fail-first"),
    (["--client-cmd", "x {base_url}", "--retry-after", "0.2"], "--retry-after"),
    (["--client-cmd", "x {base_url}", "--env", "no-such-env-xyz"], "no-such-env-xyz"),
])
def test_bad_usage_exits_2_with_one_line(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backoff-check", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("chaos: error:") and message in err[0]
