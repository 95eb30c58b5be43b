"""llm-chaos: chaos and resilience tests for LLM inference services. The front door.

A team's own suite imports from here and nothing deeper (docs/own-suites.md walks through one and
lists each name): the experiment (`Experiment`, its run handle `Run`), every fault (`rank_kill` kills one rank by index on
any backend), the checks, the verdicts and the suite helpers. The `stack`, `run_experiment` and `summary`
fixtures come with the installed pytest plugin. Every name but the errors is imported on first use
(chaos/_front.py says from where), so `import chaos` costs what the errors cost.
"""
import importlib as _importlib
import typing as _typing

from chaos._front import FRONT as _FRONT
from chaos.errors import (
    ChaosError,
    ConfigError,
    FaultError,
    FaultNotEffective,
    LoadError,
    SafetyError,
    SLOViolation,
    StackError,
    TargetError,
)

if _typing.TYPE_CHECKING:  # what a type checker and an editor see; tests/integration/api/test_front_door.py holds it to FRONT
    from chaos import checks as checks
    from chaos import faults as faults
    from chaos.checks import evaluate as evaluate
    from chaos.env import (
        BreakerPolicy as BreakerPolicy,
    )
    from chaos.env import (
        Environment as Environment,
    )
    from chaos.env import (
        SLAs as SLAs,
    )
    from chaos.env import (
        load as load_environment,
    )
    from chaos.experiment import (
        AbortLimits as AbortLimits,
    )
    from chaos.experiment import (
        Experiment as Experiment,
    )
    from chaos.experiment import (
        ExperimentRun as ExperimentRun,
    )
    from chaos.experiment import (
        Hypothesis as Hypothesis,
    )
    from chaos.experiment import (
        Status as Status,
    )
    from chaos.experiment import (
        recovered as recovered,
    )
    from chaos.experiment import suite_budgets as budgets
    from chaos.experiment import suite_plan as plan
    from chaos.experiment.breaker_tier import breaker_tier as breaker_tier
    from chaos.experiment.budget import Budget as Budget
    from chaos.experiment.budget import PhaseBudget as PhaseBudget
    from chaos.experiment.recovery_run import recovery_run as recovery_run
    from chaos.experiment.release_stages import (
        no_release_admin as no_release_admin,
    )
    from chaos.experiment.release_stages import (
        release_plan as release_plan,
    )
    from chaos.experiment.release_stages import (
        run_stages as run_stages,
    )
    from chaos.experiment.run import Run as Run
    from chaos.experiment.suite import (
        client_commands as client_commands,
    )
    from chaos.experiment.suite import (
        fault_happened as fault_happened,
    )
    from chaos.experiment.suite import (
        fault_proof as fault_proof,
    )
    from chaos.experiment.suite import (
        gateway_admin as gateway_admin,
    )
    from chaos.experiment.suite import (
        judge as judge,
    )
    from chaos.experiment.suite import (
        requires as requires,
    )
    from chaos.experiment.waits import (
        breaker_closed as breaker_closed,
    )
    from chaos.experiment.waits import (
        engine_restarted as engine_restarted,
    )
    from chaos.experiment.waits import (
        window_full as window_full,
    )
    from chaos.explore.schedule import load_schedule as load_schedule
    from chaos.explore.wiring import explorer_for as explorer_for
    from chaos.faults import (
        AllOf as AllOf,
    )
    from chaos.faults import (
        Fault as Fault,
    )
    from chaos.faults import (
        Policy as Policy,
    )
    from chaos.faults import (
        Scheduled as Scheduled,
    )
    from chaos.faults import (
        bandwidth as bandwidth,
    )
    from chaos.faults import (
        down as down,
    )
    from chaos.faults import (
        engine_death as engine_death,
    )
    from chaos.faults import (
        jitter as jitter,
    )
    from chaos.faults import (
        kill as kill,
    )
    from chaos.faults import (
        latency as latency,
    )
    from chaos.faults import (
        limit_data as limit_data,
    )
    from chaos.faults import (
        pause as pause,
    )
    from chaos.faults import (
        rank_freeze as rank_freeze,
    )
    from chaos.faults import (
        rank_kill as rank_kill,
    )
    from chaos.faults import (
        rank_link_cut as rank_link_cut,
    )
    from chaos.faults import (
        reset_peer as reset_peer,
    )
    from chaos.faults import (
        restart as restart,
    )
    from chaos.faults import (
        sim_fault as sim_fault,
    )
    from chaos.faults import (
        slicer as slicer,
    )
    from chaos.faults import (
        slow_close as slow_close,
    )
    from chaos.faults import (
        stop as stop,
    )
    from chaos.faults import (
        timeout as timeout,
    )
    from chaos.faults.engine_plugin import engine_fault as engine_fault
    from chaos.faults.gateway import misroute as misroute
    from chaos.faults.gateway import release_stage as release_stage
    from chaos.faults.http import (
        HttpFault as HttpFault,
    )
    from chaos.faults.http import (
        duplicate_chunk as duplicate_chunk,
    )
    from chaos.faults.http import (
        error_chunk as error_chunk,
    )
    from chaos.faults.http import (
        hang as hang,
    )
    from chaos.faults.http import (
        header_fault as header_fault,
    )
    from chaos.faults.http import (
        http_error as http_error,
    )
    from chaos.faults.http import (
        malformed_chunk as malformed_chunk,
    )
    from chaos.faults.http import (
        oom_error as oom_error,
    )
    from chaos.faults.http import (
        rewrite_model as rewrite_model,
    )
    from chaos.faults.http import (
        slow_first_token as slow_first_token,
    )
    from chaos.faults.http import (
        slow_headers as slow_headers,
    )
    from chaos.faults.http import (
        stream_cut as stream_cut,
    )
    from chaos.faults.http import (
        stream_stall as stream_stall,
    )
    from chaos.faults.proxy_admin import FaultProxyAdmin as FaultProxyAdmin
    from chaos.fixtures.stack import StackHandle as StackHandle
    from chaos.load import baseline as baseline
    from chaos.load.records import RequestRecord as RequestRecord
    from chaos.load.stats import percentile as percentile
    from chaos.load.workloads import DEFAULT_CLASSES as DEFAULT_CLASSES
    from chaos.load.workloads import special_corpus as special_corpus
    from chaos.observe.gateway import GatewayStateObserver as GatewayStateObserver
    from chaos.observe.gateway import gateway_failures as gateway_failures
    from chaos.observe.metrics import MetricsScraper as MetricsScraper
    from chaos.observe.timeline import Timeline as Timeline
    from chaos.pytest_plugin import hurt_params as hurt_params
    from chaos.report import allure as evidence
    from chaos.report.summary import (
        SummaryCollector as SummaryCollector,
    )
    from chaos.report.summary import (
        add_breaker as add_breaker,
    )
    from chaos.report.summary import (
        add_recovery as add_recovery,
    )
    from chaos.report.tables import latency_table as latency_table
    from chaos.report.tables import verdict_table as verdict_table
    from chaos.report.timeline import plot_breaker as plot_breaker
    from chaos.resilience.client import ResilientClient as ResilientClient
    from chaos.shared import signing as signing
    from chaos.verify import gateway_state as gateway_state
    from chaos.verify.accounting import accounting_verdict as accounting_verdict
    from chaos.verify.accounting import fault_allowance as fault_allowance
    from chaos.verify.alert_watch import AlertMonitor as AlertMonitor
    from chaos.verify.alerts import alert_verdict as alert_verdict
    from chaos.verify.anomaly import anomaly_verdict as anomaly_verdict
    from chaos.verify.anomaly import observed_anomaly as observed_anomaly
    from chaos.verify.answers import answers_verdict as answers_verdict
    from chaos.verify.answers import golden as golden
    from chaos.verify.backoff_run import check_backoff as check_backoff
    from chaos.verify.breaker import analyze as analyze_breaker
    from chaos.verify.breaker import degrade_recovery_s as degrade_recovery_s
    from chaos.verify.breaker_sizes import (
        NAMES as BREAKER_SIZE_NAMES,
    )
    from chaos.verify.breaker_sizes import (
        Size as BreakerSize,
    )
    from chaos.verify.breaker_sizes import (
        sizes as breaker_sizes,
    )
    from chaos.verify.breaker_sizes import (
        why_not as breaker_size_why_not,
    )
    from chaos.verify.breaker_sizes import (
        window_target as breaker_window_target,
    )
    from chaos.verify.breaker_table import (
        spec_vs_observed as breaker_spec_vs_observed,
    )
    from chaos.verify.breaker_table import (
        write_table as write_breaker_table,
    )
    from chaos.verify.load import (
        burst_drift as burst_drift,
    )
    from chaos.verify.load import (
        degraded_floor_verdict as degraded_floor_verdict,
    )
    from chaos.verify.load import (
        load_verdict as load_verdict,
    )
    from chaos.verify.load import (
        long_prompt_failures as long_prompt_failures,
    )
    from chaos.verify.prefix import (
        PrefixRun as PrefixRun,
    )
    from chaos.verify.prefix import (
        prefix_counters as prefix_counters,
    )
    from chaos.verify.prefix import (
        prefix_verdict as prefix_verdict,
    )
    from chaos.verify.recovery import (
        recovery_verdict as recovery_verdict,
    )
    from chaos.verify.recovery import (
        served_by as served_by,
    )
    from chaos.verify.recovery import (
        steady_seen as steady_seen,
    )
    from chaos.verify.restart_policy import check_restart_policy as check_restart_policy
    from chaos.verify.retries import retry_verdict as retry_verdict
    from chaos.verify.secrets import env_secrets as env_secrets
    from chaos.verify.secrets import scan as scan_secrets
    from chaos.verify.secrets import token_files as token_files
    from chaos.verify.signing import signing_verdict as signing_verdict
    from chaos.verify.streams import (
        MAX_TOKENS as STREAM_MAX_TOKENS,
    )
    from chaos.verify.streams import (
        PROMPT as STREAM_PROMPT,
    )
    from chaos.verify.streams import (
        ClientAnswer as ClientAnswer,
    )
    from chaos.verify.streams import (
        ClientLimit as ClientLimit,
    )
    from chaos.verify.streams import (
        attempts_for as stream_attempts_for,
    )
    from chaos.verify.streams import (
        client_verdict as client_verdict,
    )
    from chaos.verify.streams import (
        gateway_verdict as stream_gateway_verdict,
    )
    from chaos.verify.streams import (
        run_client_command as run_client_command,
    )
    from chaos.verify.streams import (
        steady_run as stream_steady_run,
    )
    from chaos.verify.streams import (
        steady_verdict as stream_steady_verdict,
    )
    from chaos.verify.verdict import Row as Row
    from chaos.verify.verdict import Verdict as Verdict

__version__ = "0.1.0"
__all__ = [  # the errors, then FRONT in its order (tests/integration/api/test_front_door.py)
    "ChaosError", "ConfigError", "FaultError", "FaultNotEffective", "LoadError", "SafetyError", "SLOViolation",
    "StackError", "TargetError", "__version__", "Environment", "load_environment", "Run", "Budget", "PhaseBudget",
    "Experiment", "ExperimentRun", "AbortLimits", "Hypothesis", "Status", "recovered", "engine_restarted",
    "breaker_closed", "window_full", "breaker_tier", "recovery_run", "Fault", "AllOf", "Scheduled", "Policy",
    "restart", "kill", "pause", "stop", "engine_death", "rank_kill", "rank_freeze", "rank_link_cut", "latency",
    "jitter", "bandwidth", "down", "timeout", "reset_peer", "slicer", "slow_close", "limit_data", "http_error",
    "oom_error", "hang", "slow_headers", "slow_first_token", "stream_stall", "stream_cut", "error_chunk",
    "malformed_chunk", "duplicate_chunk", "rewrite_model", "header_fault", "misroute", "release_stage", "sim_fault",
    "engine_fault", "checks", "evaluate", "percentile", "Verdict", "Row", "accounting_verdict", "fault_allowance",
    "recovery_verdict", "served_by", "steady_seen", "check_restart_policy", "load_verdict", "burst_drift",
    "long_prompt_failures", "degraded_floor_verdict", "retry_verdict", "signing_verdict", "anomaly_verdict",
    "observed_anomaly", "check_backoff", "alert_verdict", "AlertMonitor", "answers_verdict", "golden", "requires",
    "judge", "fault_happened", "fault_proof", "gateway_admin", "client_commands", "hurt_params", "StackHandle",
    "SummaryCollector", "add_recovery", "add_breaker", "latency_table", "verdict_table", "analyze_breaker",
    "degrade_recovery_s", "BREAKER_SIZE_NAMES", "breaker_sizes", "breaker_size_why_not", "breaker_window_target",
    "breaker_spec_vs_observed", "write_breaker_table", "GatewayStateObserver", "gateway_failures", "plot_breaker",
    "STREAM_MAX_TOKENS", "STREAM_PROMPT", "ClientAnswer", "ClientLimit", "stream_attempts_for", "client_verdict",
    "stream_gateway_verdict", "run_client_command", "stream_steady_run", "stream_steady_verdict", "ResilientClient",
    "env_secrets", "scan_secrets", "token_files", "DEFAULT_CLASSES", "special_corpus", "MetricsScraper", "Timeline",
    "PrefixRun", "prefix_counters", "prefix_verdict", "explorer_for", "load_schedule", "no_release_admin",
    "release_plan", "run_stages", "faults", "plan", "budgets", "evidence", "baseline", "gateway_state", "signing",
    "BreakerPolicy", "SLAs", "RequestRecord", "BreakerSize", "HttpFault", "FaultProxyAdmin",
]


def __getattr__(name: str) -> _typing.Any:
    """Import a front-door name on first use and keep it (PEP 562)."""
    where = _FRONT.get(name)
    if where is None:
        raise AttributeError(f"module 'chaos' has no attribute {name!r}")
    module = _importlib.import_module(where[0])
    value = module if where[1] is None else getattr(module, where[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
