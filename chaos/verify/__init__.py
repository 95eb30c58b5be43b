"""Verdicts with evidence: each returns a Verdict (rows of check/limit/measured/ok) whose
`assert_ok()` raises SLOViolation naming the limit, the measured value and the window."""
from chaos.verify.accounting import ServerLog, accounting_verdict, read_server_log, server_log_for
from chaos.verify.backoff import judge as judge_backoff
from chaos.verify.backoff_run import check_backoff
from chaos.verify.checks import (
    Check,
    all_of,
    error_rate_below,
    evaluate,
    goodput_above,
    p50_below,
    p99_below,
    percentile_below,
)
from chaos.verify.load import burst_drift, load_verdict, long_prompt_failures, regressed_classes
from chaos.verify.recorder import Arrival, Recorder
from chaos.verify.recovery import recovery_verdict, time_to_completion, time_to_health, time_to_steady
from chaos.verify.verdict import Row, Verdict

__all__ = [
    "Arrival", "Check", "Recorder", "Row", "Verdict", "accounting_verdict", "all_of", "burst_drift", "check_backoff",
    "error_rate_below", "evaluate", "goodput_above", "judge_backoff", "load_verdict", "long_prompt_failures",
    "p50_below", "p99_below", "percentile_below", "read_server_log", "regressed_classes", "server_log_for",
    "ServerLog", "recovery_verdict", "time_to_completion", "time_to_health", "time_to_steady",
]
