"""The `liveness:` section: the team's liveness probe, what restarts a replica that fails it (Kubernetes'
livenessProbe: timeoutSeconds, periodSeconds, failureThreshold; the defaults here are Kubernetes' own). The
recovery suite judges it both ways: the slow-but-healthy control must not be restarted by it, and each fault's
detection table says how soon it would have caught the fault (chaos.verify.liveness)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class LivenessProbe(BaseModel):
    """The team's liveness probe of each replica."""

    model_config = ConfigDict(extra="forbid")

    path: Literal["/health", "/v1/models"] = Field("/health", description="what it GETs on the replica")
    timeout_s: float = Field(1.0, gt=0, le=60, description="an answer later than this is a failure")
    period_s: float = Field(10.0, gt=0, le=600, description="how often it probes")
    failure_threshold: int = Field(3, ge=1, le=100, description="failures in a row that restart the replica")

    def describe(self) -> str:
        """'GET /health, 1 s timeout, every 10 s, restart after 3 failures in a row'."""
        return (f"GET {self.path}, {self.timeout_s:g} s timeout, every {self.period_s:g} s, restart after "
                f"{self.failure_threshold} failure{'s' if self.failure_threshold > 1 else ''} in a row")
