"""The cancellation verdict on fed data: a hop that lets go passes, one that holds on fails, one that cannot
be seen is not proven."""
from __future__ import annotations

import math

from chaos.load.hangup import HangUp, HangUpRun, StreamClient
from chaos.observe.engine_load import EngineLoad, EngineSample
from chaos.verify.cancel import cancel_verdict

T = 1000.0  # the last hang-up
CANCEL_S = 2.0


def _run(n: int = 3, tokens: int = 40) -> HangUpRun:
    step = HangUp(clients=n, after_tokens=40, stay=2)
    run = HangUpRun(step, baseline=(T - 3.0, T - 2.0))
    for i in range(n):
        run.clients.append(StreamClient(f"h{i}", "hangup", t_sent=T - 1.6, t_first_token=T - 1.5,
                                        t_hangup=T - 0.01 * i, t_end=T, tokens=tokens))
    run.clients += [StreamClient(f"s{i}", "stay", t_sent=T - 4, t_first_token=T - 3.9) for i in range(2)]
    return run


def _proxy(outcome: str = "abort", after_s: float = 0.05, ids: int = 3) -> list[dict]:
    return [{"request_id": f"h{i}", "t_finish": T - 0.01 * i + after_s, "outcome": outcome} for i in range(ids)]


def _engine(freed_after_s: float | None, base: int = 2, held: int = 5, counts_aborts: bool = True) -> EngineLoad:
    """Sweeps every 0.1 s from T-4 to T+5: `base` running alone, `held` from T-1.5, back to `base` at
    T+freed_after_s (never when None), the engine counting each freed request as an abort; each running
    request decodes 50 tokens/s."""
    load, gen, t = EngineLoad(("a", "b")), 0.0, T - 4.0
    while t <= T + 5.0:
        freed = freed_after_s is not None and t >= T + freed_after_s
        running = base if t < T - 1.5 or freed else held
        aborts = (7.0 + (held - base if freed else 0)) if counts_aborts else None  # 7 from before the run
        load.samples.append(EngineSample(t, {"a": (running - 1, gen / 2, aborts), "b": (1, gen / 2, 0.0)}))
        gen += running * 50 * 0.1
        t += 0.1
    return load


LET_GO, FREED = _proxy(), _engine(0.1)


def _judge(run: HangUpRun | None = None, rows: list | None = LET_GO, engine: EngineLoad | None = FREED,
           read_at: float = T + 5.0):
    return cancel_verdict(run or _run(), rows, engine, cancel_s=CANCEL_S, read_at=read_at)


def test_every_hop_lets_go_in_time() -> None:
    v = _judge()
    assert v.ok and not v.unproven, [r.line() for r in v.rows]
    assert v.row("upstream_let_go_s").measured == 0.05
    assert v.row("engine_running_back_s").measured <= 0.2
    assert v.row("generation_tokens_per_s_after").measured == 100.0
    assert v.row("engine_aborted_requests").measured == 3


def test_a_gateway_that_keeps_the_upstream_open_fails() -> None:
    v = _judge(rows=_proxy("length", after_s=19.0))
    r = v.row("upstream_let_go_s")
    assert r.ok is False and r.measured == "held" and "ended 19.0 s after its client left (outcome length)" in r.detail


def test_an_upstream_still_open_when_the_log_is_read_fails() -> None:
    v = _judge(rows=_proxy(ids=1))
    r = v.row("upstream_let_go_s")
    assert r.ok is False and "h1 still open 5.0 s after its client left" in r.detail


def test_a_gateway_that_drops_the_request_ids_is_not_proven_not_held() -> None:
    # LiteLLM does not pass x-request-id on: the fault proxy logs the aborted requests under its own fp- ids, and the
    # clients' ids are nowhere in its log. That is no proof that they are still open (the engine let them go).
    minted = [{"request_id": f"fp-{i:032x}", "t_arrival": T - 1.55, "t_finish": T + 0.05, "outcome": "abort"}
              for i in range(3)]
    r = _judge(rows=minted).row("upstream_let_go_s")
    assert r.ok is None and r.unproven and "did not pass x-request-id on" in r.unproven, r.line()
    # the same log without the minted lines: every id missing reads as held open (the negative control's case)
    r = _judge(rows=[]).row("upstream_let_go_s")
    assert r.ok is False and "still open" in r.detail


def test_a_log_read_before_cancel_s_is_not_proven() -> None:
    r = _judge(rows=_proxy(ids=1), read_at=T + 0.5).row("upstream_let_go_s")
    assert r.ok is None and r.unproven


def test_an_engine_that_keeps_generating_fails_both_ways() -> None:
    v = _judge(engine=_engine(None))
    assert v.row("engine_running_back_s").ok is False and v.row("engine_running_back_s").measured == "never"
    rate = v.row("generation_tokens_per_s_after")
    assert rate.ok is False and rate.measured == 250.0 and rate.limit == 150.0
    # a counter that never moved cannot tell an engine that kept generating from one that does not count its
    # clients' aborts (vLLM 0.32): the two rows above fail this engine, the abort row judges nothing
    aborts = v.row("engine_aborted_requests")
    assert aborts.ok is None and aborts.measured == 0 and not v.ok


def test_aborts_counted_after_cancel_s_fail_and_uncounted_ones_are_not_proven() -> None:
    assert _judge(engine=_engine(3.0)).row("engine_aborted_requests").ok is False
    assert _judge(engine=_engine(0.1, counts_aborts=False)).row("engine_aborted_requests").unproven


def test_an_engine_that_never_counts_its_clients_aborts_leaves_the_row_unjudged() -> None:
    # vLLM 0.32: the abort counter never moves for a hang-up; the running and rate rows still judge the freeing
    never = _engine(0.1)
    for smp in never.samples:
        smp.replicas["a"] = (*smp.replicas["a"][:2], 7.0)
    v = _judge(engine=never)
    r = v.row("engine_aborted_requests")
    assert r.ok is None and r.measured == 0 and "does not count its clients' hang-ups" in r.detail, r.line()
    assert v.ok and v.row("engine_running_back_s").ok is True


def test_an_engine_that_lets_go_late_fails() -> None:
    r = _judge(engine=_engine(3.0)).row("engine_running_back_s")
    assert r.ok is False and math.isclose(r.measured, 3.0, abs_tol=0.11)


def test_unobserved_hops_are_not_proven() -> None:
    v = _judge(rows=None, engine=None)
    assert {r.check for r in v.unproven} == {"upstream_let_go_s", "engine_running_back_s",
                                              "generation_tokens_per_s_after", "engine_aborted_requests"}
    assert v.ok  # not proven is never a failure, and never a pass: the checklist says so


def test_an_engine_that_never_showed_them_cannot_tell() -> None:
    v = _judge(engine=_engine(0.1, held=2))
    assert v.row("engine_running_back_s").unproven and v.row("generation_tokens_per_s_after").unproven


def test_clients_that_did_not_hang_up_fail_the_step() -> None:
    run = _run(tokens=3)
    v = _judge(run=run)
    r = v.row("clients_hung_up")
    assert r.ok is False and r.measured == 0 and "h0 saw 3 tokens" in r.detail
