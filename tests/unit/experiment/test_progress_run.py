"""The progress-truth scenario's steps (chaos.experiment.progress_run) on a fake run handle: a replica the stack
restarted has its fault undone only once its new process answers (the revert once met its closed port); a held
fault (the negative control) is reverted first; both end in the progress-truth verdict."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from chaos.env import load
from chaos.experiment import progress_run as pr
from chaos.observe.timeline import Timeline
from chaos.verify.accounting import ServerLog


class FakeRun:
    def __init__(self, replica: Replica) -> None:
        self.t, self.calls, self.replica = 0.0, [], replica  # type: ignore[var-annotated]
        self.timeline = Timeline(clock=lambda: self.t)
        self.judged: dict[str, list[Any]] = {}

    def clock(self) -> float:
        return self.t

    @contextmanager
    def phase(self, name: str, **detail: Any) -> Iterator[None]:
        yield

    def __getattr__(self, name: str) -> Any:  # observe, add_observer, start_load, steady_state, hold, wait, stop_load
        return lambda *a, **k: self.calls.append(name)

    def inject(self, fault: Any) -> dict[str, Any]:
        self.calls.append("inject")
        return {}

    def wait_until(self, condition: Any, timeout: float, every: float = 0.2) -> bool:
        self.t += 4.0
        self.replica.restarts += self.replica.restarted_by_stack
        return True

    def revert(self, *, check: bool = True) -> None:
        self.calls.append(f"revert(check={check})")

    def wait_recovered(self, since: float, timeout: float, source: str | None = None) -> float:
        self.calls.append("wait_recovered")
        return 0.1

    def judge(self, stage: str, verdicts: Any) -> None:
        self.judged[stage] = list(verdicts)


class Replica:
    def __init__(self, restarted_by_stack: int) -> None:
        self.restarts, self.restarted_by_stack = 0, restarted_by_stack

    def restart_count(self) -> int:
        return self.restarts


class FakeStack:
    def __init__(self, replica: Replica) -> None:
        self.env, self.replica = load("local"), replica

    def direct_url(self, name: str) -> str:
        return "http://127.0.0.1:9"

    def target(self, name: str) -> Replica:
        return self.replica

    def server_log(self, *sources: str, since: float | None = None, until: float | None = None) -> ServerLog:
        return ServerLog([], "fault proxy")  # no stream's pauses: the counters alone judge


class NoScraper:
    def __init__(self, *a: Any, **k: Any) -> None:
        self.source = ""

    def start(self) -> NoScraper:
        return self


def test_a_stack_that_never_restarts_the_replica_is_judged_by_progress_truth_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a stack that watches health only: no restart within twice the SLA, the fault reverted as held, and no stage 1
    # "restart seen" failure in front of the progress-truth verdict that says what went wrong
    monkeypatch.setattr(pr, "engine_counter_scraper", NoScraper)
    replica = Replica(restarted_by_stack=0)
    run = FakeRun(replica)
    exp = pr.progress_run(FakeStack(replica), "decode-stall", "replica-a", lambda: object(),  # type: ignore[arg-type]
                          restarted=True)
    exp.steps(run)  # type: ignore[misc]
    after = run.calls[run.calls.index("inject") + 1:]
    assert after[:2] == ["revert(check=True)", "wait_recovered"]
    assert list(run.judged) == ["decode made progress whenever /health said 200"]


@pytest.mark.parametrize("restarted", [True, False])
def test_a_restarted_replica_is_reverted_after_it_answers_a_held_fault_before(monkeypatch: pytest.MonkeyPatch,
                                                                               restarted: bool) -> None:
    monkeypatch.setattr(pr, "engine_counter_scraper", NoScraper)
    replica = Replica(restarted_by_stack=int(restarted))
    run = FakeRun(replica)
    exp = pr.progress_run(FakeStack(replica), "decode-stall", "replica-a", lambda: object(),  # type: ignore[arg-type]
                          restarted=restarted)
    exp.steps(run)  # type: ignore[misc]
    after = run.calls[run.calls.index("inject") + 1:]
    if restarted:
        assert after[:2] == ["wait_recovered", "revert(check=False)"]
        assert run.judged["the fault really happened"][0].ok
    else:
        assert after[:3] == ["hold", "revert(check=True)", "wait_recovered"]
        assert "the fault really happened" not in run.judged
    (v,) = run.judged["decode made progress whenever /health said 200"]
    assert v.row("progress_truth replica-a").unproven  # the fake scraped nothing: never a pass
