"""Where each name of the front door (`chaos.__all__`) lives: name -> (module, attribute or None for a
module). `chaos/__init__.py` imports them on first use, so `import chaos` (the CLI, the reference
client) stays as cheap as the errors alone."""
from __future__ import annotations

_F, _H, _V = "chaos.faults", "chaos.faults.http", "chaos.verify.verdict"

FRONT: dict[str, tuple[str, str | None]] = {
    # the experiment: an environment, a scenario written step by step, or a declared experiment
    "Environment": ("chaos.env", "Environment"),
    "load_environment": ("chaos.env", "load"),
    "Scenario": ("chaos.scenario", "Scenario"),
    "Budget": ("chaos.experiment.budget", "Budget"),
    "Experiment": ("chaos.experiment", "Experiment"),
    "ExperimentRun": ("chaos.experiment", "ExperimentRun"),
    "AbortLimits": ("chaos.experiment", "AbortLimits"),
    "Hypothesis": ("chaos.experiment", "Hypothesis"),
    "Status": ("chaos.experiment", "Status"),
    "recovered": ("chaos.experiment", "recovered"),
    # every fault: one replica, one rank, the network, the HTTP/SSE stream, the gateway, the simulator
    "Fault": (_F, "Fault"), "AllOf": (_F, "AllOf"), "Scheduled": (_F, "Scheduled"), "Policy": (_F, "Policy"),
    "restart": (_F, "restart"), "kill": (_F, "kill"), "pause": (_F, "pause"), "stop": (_F, "stop"),
    "engine_death": (_F, "engine_death"),
    "rank_kill": (_F, "rank_kill"), "rank_freeze": (_F, "rank_freeze"), "rank_link_cut": (_F, "rank_link_cut"),
    "latency": (_F, "latency"), "jitter": (_F, "jitter"), "bandwidth": (_F, "bandwidth"), "down": (_F, "down"),
    "timeout": (_F, "timeout"), "reset_peer": (_F, "reset_peer"), "slicer": (_F, "slicer"),
    "slow_close": (_F, "slow_close"), "limit_data": (_F, "limit_data"),
    "http_error": (_H, "http_error"), "oom_error": (_H, "oom_error"), "hang": (_H, "hang"),
    "slow_headers": (_H, "slow_headers"), "slow_first_token": (_H, "slow_first_token"),
    "stream_stall": (_H, "stream_stall"), "stream_cut": (_H, "stream_cut"), "error_chunk": (_H, "error_chunk"),
    "malformed_chunk": (_H, "malformed_chunk"), "duplicate_chunk": (_H, "duplicate_chunk"),
    "rewrite_model": (_H, "rewrite_model"), "header_fault": (_H, "header_fault"),
    "misroute": ("chaos.faults.gateway", "misroute"), "release_stage": ("chaos.faults.gateway", "release_stage"),
    "sim_fault": (_F, "sim_fault"),
    # the checks over a run's request records
    "Check": ("chaos.verify.checks", "Check"), "all_of": ("chaos.verify.checks", "all_of"),
    "evaluate": ("chaos.verify.checks", "evaluate"), "p50_below": ("chaos.verify.checks", "p50_below"),
    "p99_below": ("chaos.verify.checks", "p99_below"), "percentile_below": ("chaos.verify.checks", "percentile_below"),
    "error_rate_below": ("chaos.verify.checks", "error_rate_below"),
    "goodput_above": ("chaos.verify.checks", "goodput_above"),
    "percentile": ("chaos.load.stats", "percentile"),
    # the verdicts: rows of check / limit / measured / ok, "not proven" where the harness could not tell
    "Verdict": (_V, "Verdict"), "Row": (_V, "Row"),
    "accounting_verdict": ("chaos.verify.accounting", "accounting_verdict"),
    "fault_allowance": ("chaos.verify.accounting", "fault_allowance"),
    "recovery_verdict": ("chaos.verify.recovery", "recovery_verdict"),
    "served_by": ("chaos.verify.recovery", "served_by"), "steady_seen": ("chaos.verify.recovery", "steady_seen"),
    "check_restart_policy": ("chaos.verify.restart_policy", "check_restart_policy"),
    "load_verdict": ("chaos.verify.load", "load_verdict"), "burst_drift": ("chaos.verify.load", "burst_drift"),
    "long_prompt_failures": ("chaos.verify.load", "long_prompt_failures"),
    "degraded_floor_verdict": ("chaos.verify.load", "degraded_floor_verdict"),
    "retry_verdict": ("chaos.verify.retries", "retry_verdict"),
    "signing_verdict": ("chaos.verify.signing", "signing_verdict"),
    "anomaly_verdict": ("chaos.verify.anomaly", "anomaly_verdict"),
    "observed_anomaly": ("chaos.verify.anomaly", "observed_anomaly"),
    "check_backoff": ("chaos.verify.backoff_run", "check_backoff"),
    # writing a suite: preconditions, staged verdicts, the report's evidence, the target matrix
    "requires": ("chaos.suite", "requires"), "judge": ("chaos.suite", "judge"),
    "fault_happened": ("chaos.suite", "fault_happened"), "fault_proof": ("chaos.suite", "fault_proof"),
    "gateway_admin": ("chaos.suite", "gateway_admin"), "hurt_params": ("chaos.pytest_plugin", "hurt_params"),
    "StackHandle": ("chaos.fixtures.stack", "StackHandle"),
    "SummaryCollector": ("chaos.report.summary", "SummaryCollector"),
    "add_recovery": ("chaos.report.summary", "add_recovery"), "add_breaker": ("chaos.report.summary", "add_breaker"),
    "latency_table": ("chaos.report.tables", "latency_table"), "verdict_table": ("chaos.report.tables", "verdict_table"),
    # namespaces: every fault, the preconditions `chaos env check` asks, the time budgets, the report's steps
    "faults": ("chaos.faults", None), "plan": ("chaos.plan", None), "budgets": ("chaos.budgets", None),
    "evidence": ("chaos.report.allure", None),
}
