"""llm-chaos: chaos and resilience tests for LLM inference services. The front door.

A team's own suite imports from here (docs/own-suites.md walks through one): the one experiment model,
the verdicts, the suite helpers and a few namespaces (`faults`, `checks`, `waits`, `scenarios`,
`evidence`, `plan`, `budgets`); the `stack`, `run_experiment` and `summary` fixtures come with the
installed pytest plugin. Each name is an import in the TYPE_CHECKING block below (and in `__all__`): a type checker reads it
there, and at run time `__getattr__` imports it on first use from that same line, so `import chaos`
costs what the errors cost.
"""
import ast as _ast
import importlib as _importlib
import typing as _typing
from pathlib import Path as _Path

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

if _typing.TYPE_CHECKING:
    # the experiment
    from chaos import checks as checks
    from chaos import faults as faults
    from chaos import scenarios as scenarios
    from chaos.env import BreakerPolicy as BreakerPolicy
    from chaos.env import Environment as Environment
    from chaos.env import load as load_environment
    from chaos.experiment import suite_budgets as budgets
    from chaos.experiment import suite_plan as plan
    from chaos.experiment import waits as waits
    from chaos.experiment.budget import Budget as Budget
    from chaos.experiment.outcome import AbortLimits as AbortLimits
    from chaos.experiment.outcome import ExperimentRun as ExperimentRun
    from chaos.experiment.outcome import Status as Status
    from chaos.experiment.run import Run as Run
    from chaos.experiment.runner import Experiment as Experiment
    from chaos.experiment.suite import client_commands as client_commands
    from chaos.experiment.suite import fault_happened as fault_happened
    from chaos.experiment.suite import fault_proof as fault_proof
    from chaos.experiment.suite import judge as judge
    from chaos.experiment.suite import requires as requires
    from chaos.faults import Fault as Fault
    from chaos.fixtures.stack import StackHandle as StackHandle
    from chaos.report import allure as evidence
    from chaos.report.summary import SummaryCollector as SummaryCollector
    from chaos.report.tables import latency_table as latency_table
    from chaos.resilience.client import ResilientClient as ResilientClient
    from chaos.verify.accounting import accounting_verdict as accounting_verdict
    from chaos.verify.alert_watch import AlertMonitor as AlertMonitor
    from chaos.verify.alerts import alert_verdict as alert_verdict
    from chaos.verify.answers import answers_verdict as answers_verdict
    from chaos.verify.answers import golden as golden
    from chaos.verify.recovery import recovery_verdict as recovery_verdict
    from chaos.verify.verdict import Row as Row
    from chaos.verify.verdict import Verdict as Verdict

__version__ = "0.1.0"


def _door() -> dict[str, tuple[str, str]]:
    """name -> (module, attribute) for every import above, read from this file's own source."""
    out: dict[str, tuple[str, str]] = {}
    for node in _ast.parse(_Path(__file__).read_text(encoding="utf-8")).body:
        for stmt in node.body if isinstance(node, _ast.If) else [node]:
            if isinstance(stmt, _ast.ImportFrom) and (stmt.module or "").startswith("chaos"):
                out.update({a.asname or a.name: (stmt.module or "", a.name) for a in stmt.names})
    return out


_DOOR = _door()
__all__ = [  # every import above, in its order (tests/unit/api/test_door.py holds the two together)
    "ChaosError", "ConfigError", "FaultError", "FaultNotEffective", "LoadError", "SafetyError", "SLOViolation",
    "StackError", "TargetError", "checks", "faults", "scenarios", "BreakerPolicy", "Environment",
    "load_environment", "budgets", "plan", "waits", "Budget", "AbortLimits", "ExperimentRun", "Status", "Run",
    "Experiment", "client_commands", "fault_happened", "fault_proof", "judge", "requires", "Fault",
    "StackHandle", "evidence", "SummaryCollector", "latency_table", "ResilientClient", "accounting_verdict",
    "AlertMonitor", "alert_verdict", "answers_verdict", "golden", "recovery_verdict", "Row", "Verdict",
]


def __getattr__(name: str) -> _typing.Any:
    """Import a front-door name on first use and keep it (PEP 562)."""
    where = _DOOR.get(name)
    if where is None or name in globals():
        raise AttributeError(f"module 'chaos' has no attribute {name!r}")
    module, attr = where
    try:
        if module == "chaos":  # a package of its own: `from chaos import faults`
            raise AttributeError(attr)
        value = getattr(_importlib.import_module(module), attr)
    except AttributeError:  # a module of its package not imported yet: `from chaos.experiment import waits`
        value = _importlib.import_module(f"{module}.{attr}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
