"""The embedded supervisor's progress keeper (chaos.bridge.progress_keeper): it restarts a replica each time
the gateway's count of its progress ejections rose, never for another replica's, an unknown name, a gateway
that does not answer or a gateway restart that started the counts again."""
from __future__ import annotations

from typing import Any, cast

from chaos.bridge.progress_keeper import ProgressKeeper
from chaos.targets import Target


class FakeTarget:
    def __init__(self) -> None:
        self.restarts = 0

    def restart(self) -> None:
        self.restarts += 1


def keeper(states: list[Any]) -> tuple[ProgressKeeper, dict[str, FakeTarget]]:
    targets = {"a": FakeTarget(), "b": FakeTarget()}

    def fetch() -> dict[str, Any]:
        state = states.pop(0)
        if isinstance(state, Exception):
            raise state
        return {"pools": {}, "ejection": {"progress_ejections": state}}

    return ProgressKeeper("http://gw", "t", cast("dict[str, Target]", targets), fetch=fetch), targets


def test_a_rising_count_restarts_that_replica_once_per_ejection() -> None:
    k, targets = keeper([{}, {"a": 1}, {"a": 1}, {"a": 2, "x": 1}, OSError("refused"), {"a": 2}, {"a": 1}, {"a": 2}])
    assert [k.poll_once() for _ in range(8)] == [[], ["a"], [], ["a"], [], [], [], ["a"]]
    assert targets["a"].restarts == 3 and targets["b"].restarts == 0 and k.restarted == ["a", "a", "a"]
