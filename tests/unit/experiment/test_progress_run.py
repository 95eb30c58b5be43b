"""The progress-truth scenario's steps (chaos.experiment.progress_run) on a fake run handle: a replica the stack
restarted has its fault undone only once its new process answers (the revert once met its closed port); a held
fault (the negative control) is reverted first; both end in the progress-truth verdict, with a row for every
replica (the others' probes and counters started beside the hurt one's)."""
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

    def observe_health(self, base_url: str, source: str, *, every_s: float) -> str:
        self.calls.append(f"observe_health({source})")
        return source

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


def test_every_other_replica_is_probed_and_judged_a_stalled_peer_fails_its_own_row(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # local's replica-b says 200 while it holds 2 requests and decodes nothing for 10 s (over the 5 s SLA);
    # replica-c decodes; the hurt replica-a was scraped by nothing here: not proven, never a pass
    monkeypatch.setattr(pr, "engine_counter_scraper", NoScraper)
    replica = Replica(restarted_by_stack=1)
    run = FakeRun(replica)
    tl = run.timeline
    for i in range(21):
        t = i * 0.5
        for peer, generated in (("replica-b", 100.0), ("replica-c", 100.0 + 20 * t)):
            tl.sample(f"replica-health:{peer}", "status", 200, t=t)
            tl.sample(f"metrics:{peer}", "vllm:generation_tokens_total", generated, t=t)
            tl.sample(f"metrics:{peer}", "vllm:num_requests_running", 2.0, t=t)
    exp = pr.progress_run(FakeStack(replica), "decode-stall", "replica-a", lambda: object(),  # type: ignore[arg-type]
                          restarted=True)
    exp.steps(run)  # type: ignore[misc]
    assert {"observe_health(replica-health:replica-b)", "observe_health(replica-health:replica-c)"} <= set(run.calls)
    assert not any("replica-a" in c for c in run.calls if c.startswith("observe_health"))
    (v,) = run.judged["decode made progress whenever /health said 200"]
    stalled, decoding = v.row("progress_truth replica-b"), v.row("progress_truth replica-c")
    assert stalled.ok is False and "/health said 200 for 10.0 s" in stalled.detail, stalled.detail
    assert decoding.ok is True and not decoding.unproven, decoding.detail
    assert v.row("progress_truth replica-a").unproven
