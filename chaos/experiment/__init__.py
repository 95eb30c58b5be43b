"""Experiments: one `Experiment` (a steady-state hypothesis, load, a fault, a hold, recovery and verdicts, or
steps of its own over the run handle) and one runner, on an injectable clock with typed events, an abort
guard and an emergency stop (see runner.py)."""
from chaos.checks import Hypothesis
from chaos.experiment.events import EventBus
from chaos.experiment.handle import RunHandle
from chaos.experiment.journal import Journal
from chaos.experiment.runner import EXIT_CODES, AbortLimits, Experiment, ExperimentRun, Status, execute, recovered
from chaos.experiment.stop import EmergencyStop, StopSwitch, request_stop, stop_file
from chaos.experiment.waits import Condition, breaker_closed, engine_restarted, window_full

__all__ = ["EXIT_CODES", "AbortLimits", "Condition", "EmergencyStop", "EventBus", "Experiment", "ExperimentRun",
           "Hypothesis", "Journal", "RunHandle", "Status", "StopSwitch", "breaker_closed", "engine_restarted",
           "execute", "recovered", "request_stop", "stop_file", "window_full"]
