"""A killed rank's revert waits for the supervisor that restarted the replica (chaos.faults.nccl.RankKill):
a restart counted while the replica is not yet running again (Docker's "restarting") is never answered by
starting it from here, which replaced the lab's container and erased the restart it had counted."""
from __future__ import annotations

from chaos.faults.base import Policy
from chaos.faults.nccl import RankKill


class Restarting:
    """A replica whose supervisor has counted one restart and is running again after `down` polls."""

    name = "replica-a"

    def __init__(self, down: int, restarted: bool = True) -> None:
        self.down, self.count, self.started = down, 1 if restarted else 0, 0

    def restart_count(self) -> int:
        return self.count

    def is_running(self) -> bool:
        self.down -= 1
        return self.down < 0 or self.started > 0

    def start(self) -> None:
        self.started += 1

    def wait_healthy(self, timeout: float = 30.0) -> None:
        pass


def _kill(t: Restarting, timeout: float = 5.0) -> RankKill:
    f = RankKill(t).using(Policy(sleep=lambda s: None, recover_timeout_s=timeout))  # type: ignore[arg-type]
    f._restarts = 0
    return f


def test_a_replica_its_supervisor_is_restarting_is_waited_for_not_started() -> None:
    t = Restarting(down=5)
    f = _kill(t)
    f._unapply()
    assert t.started == 0 and f.evidence["engine_restarted"] is True


def test_a_replica_nothing_restarted_is_started_once_the_wait_is_over() -> None:
    t = Restarting(down=10**9, restarted=False)
    f = _kill(t, timeout=0.05)
    f._unapply()
    assert t.started == 1 and f.evidence["engine_restarted"] is False
