"""The experiments llm-chaos's own suites run, as factories that return an `Experiment`: a replica's
recovery from one fault (`recovery_run`), a breaker tier on the canaries (`breaker_tier`), a replica's decode
progress against its health (`progress_run`) and the slow-but-healthy control that measures each detection
signal's false alarms (`detection_control`)."""
from chaos.experiment.breaker_tier import breaker_tier
from chaos.experiment.detection_control import detection_control
from chaos.experiment.progress_run import progress_run
from chaos.experiment.recovery_run import recovery_run

__all__ = ["breaker_tier", "detection_control", "progress_run", "recovery_run"]
