"""What a scenario uses of the running stack, whoever provides it (the pytest plugin's `stack` fixture,
chaos.fixtures.stack.StackHandle, is one): the experiment layer names its need and the faces fill it."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from chaos.env import Environment
    from chaos.faults.proxy_admin import FaultProxyAdmin
    from chaos.targets import Target
    from chaos.verify.accounting import ServerLog


class RunningStack(Protocol):
    """The environment, its targets and the replica side's evidence, read over the wire."""

    @property
    def env(self) -> Environment: ...

    def target(self, name: str) -> Target: ...

    def targets_in(self, pool: str) -> list[str]: ...

    def direct_url(self, name: str) -> str: ...

    def serves(self, url: str, timeout: float = 2.0) -> bool: ...

    def server_log(self, *sources: str, since: float | None = None, until: float | None = None,
                   records: list[Any] | None = None) -> ServerLog: ...

    def attribute_replicas(self, records: list[Any]) -> int: ...

    def upstream_attempts(self, since: float, until: float) -> list[Any] | None: ...

    def fault_proxy(self, target: str) -> FaultProxyAdmin: ...

    def capacity_rps(self) -> float | None: ...
