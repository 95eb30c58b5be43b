"""The scenarios this repository's suites declare, as steps a suite (ours or a team's own) calls in order:
a breaker tier (`BreakerTier`) and a replica's recovery (`RecoveryRun`). Each step is one line of the
scenario; the waiting, the timing and the verdicts' bookkeeping live here."""
from chaos.scenarios.breaker import BreakerTier
from chaos.scenarios.recovery import RecoveryRun

__all__ = ["BreakerTier", "RecoveryRun"]
