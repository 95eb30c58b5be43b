"""Experiments: a steady-state hypothesis, load, a fault, a hold, recovery and verdicts, run on an
injectable clock with typed events, an abort guard and an emergency stop (see runner.py)."""
from chaos.experiment.events import EventBus
from chaos.experiment.hypothesis import Hypothesis, check, error_rate_below, goodput_above, p99_below
from chaos.experiment.journal import Journal
from chaos.experiment.runner import EXIT_CODES, AbortLimits, Experiment, ExperimentRun, Status, recovered
from chaos.experiment.stop import EmergencyStop, StopSwitch, request_stop, stop_file

__all__ = ["EXIT_CODES", "AbortLimits", "EmergencyStop", "EventBus", "Experiment", "ExperimentRun", "Hypothesis",
           "Journal", "Status", "StopSwitch", "check", "error_rate_below", "goodput_above", "p99_below",
           "recovered", "request_stop", "stop_file"]
