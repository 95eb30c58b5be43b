"""Verdicts with evidence: each returns a Verdict (rows of check/limit/measured/ok) whose
`assert_ok()` raises SLOViolation naming the limit, the measured value and the window."""
from chaos.verify.accounting import ServerLog, accounting_verdict, read_server_log, server_log_for
from chaos.verify.backoff import judge as judge_backoff
from chaos.verify.backoff_run import check_backoff
from chaos.verify.load import burst_drift, load_verdict, long_prompt_failures, regressed_classes
from chaos.verify.recorder import Arrival, Recorder
from chaos.verify.recovery import recovery_verdict, time_to_completion, time_to_health, time_to_steady
from chaos.verify.verdict import Row, Verdict

__all__ = [
    "Arrival", "Recorder", "Row", "Verdict", "accounting_verdict", "burst_drift", "check_backoff", "judge_backoff",
    "load_verdict", "long_prompt_failures", "read_server_log", "regressed_classes", "server_log_for",
    "ServerLog", "recovery_verdict", "time_to_completion", "time_to_health", "time_to_steady",
]
