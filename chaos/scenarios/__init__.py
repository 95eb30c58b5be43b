"""The experiments llm-chaos's own suites run, as factories that return an `Experiment`: a replica's
recovery from one fault (`recovery_run`) and a breaker tier on the canaries (`breaker_tier`)."""
from chaos.experiment.breaker_tier import breaker_tier
from chaos.experiment.recovery_run import recovery_run

__all__ = ["breaker_tier", "recovery_run"]
