"""Experiments: a steady-state hypothesis, load, a fault, a hold, recovery and verdicts, run on an
injectable clock with typed events, an abort guard and an emergency stop (see runner.py)."""
from chaos.checks import Hypothesis
from chaos.experiment.events import EventBus
from chaos.experiment.journal import Journal
from chaos.experiment.runner import EXIT_CODES, AbortLimits, Experiment, ExperimentRun, Status, recovered
from chaos.experiment.stop import EmergencyStop, StopSwitch, request_stop, stop_file

__all__ = ["EXIT_CODES", "AbortLimits", "EmergencyStop", "EventBus", "Experiment", "ExperimentRun", "Hypothesis",
           "Journal", "Status", "StopSwitch", "recovered", "request_stop", "stop_file"]
