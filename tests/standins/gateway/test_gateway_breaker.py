"""RateBreaker: window arithmetic, thresholds at their boundaries, states, with an injected clock."""
from chaos.stack.gateway.breaker import NORMAL, PROBE, RateBreaker, SlidingWindow, State


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def make(clock, **kw):
    opts = dict(failure_rate=0.01, slow_p99_s=2.0, window_s=10.0, min_calls=100, open_wait_s=5.0, half_open_calls=3)
    opts.update(kw)
    return RateBreaker("canary", clock=clock, wall=clock, **opts)


def feed(br, clock, n_ok, n_fail=0, latency=0.01, dt=0.001):
    for ok in [True] * n_ok + [False] * n_fail:
        clock.t += dt
        br.record(ok, latency)


def test_error_rate_boundary_099_does_not_trip_100_does():
    c = Clock()
    br = make(c)
    feed(br, c, 100, 1)            # 1 / 101 = 0.99 %
    assert br.state is State.CLOSED
    br2 = make(c)
    feed(br2, c, 99, 1)            # 1 / 100 = 1.00 %
    assert br2.state is State.OPEN
    tr = br2.transitions[-1]
    assert (tr.src, tr.dst, tr.calls) == (State.CLOSED, State.OPEN, 100)
    assert "error rate" in tr.reason


def test_min_calls_hold_the_breaker_closed():
    c = Clock()
    br = make(c, min_calls=50)
    feed(br, c, 0, 49)
    assert br.state is State.CLOSED and br.stats().error_rate == 1.0
    feed(br, c, 0, 1)
    assert br.state is State.OPEN


def test_time_window_forgets_old_failures():
    c = Clock()
    br = make(c, min_calls=10)
    feed(br, c, 0, 0)
    br.record(False, 0.01)
    c.t += 10.5                    # the failure leaves the 10 s window
    feed(br, c, 200)
    st = br.stats()
    assert st.failures == 0 and st.calls == 200 and br.state is State.CLOSED


def test_count_window_keeps_last_n():
    w = SlidingWindow(size=5)
    for i in range(8):
        w.add(float(i), i != 0, 0.1)
    st = w.stats()
    assert st.calls == 5 and st.failures == 0


def test_p99_threshold_trips_on_latency():
    c = Clock()
    br = make(c)
    feed(br, c, 98, latency=0.1)
    feed(br, c, 1, latency=2.5)    # 1 slow of 99: nearest-rank P99 is still fast
    assert br.state is State.CLOSED
    feed(br, c, 1, latency=2.0)    # 2 slow of 100: P99 = 2.0 >= 2.0
    assert br.state is State.OPEN and "p99" in br.transitions[-1].reason


def test_half_open_probes_close_or_reopen_with_longer_wait():
    c = Clock()
    br = make(c, min_calls=10)
    feed(br, c, 0, 10)
    assert br.acquire() is None
    c.t += 5.0
    assert br.state is State.HALF_OPEN
    permits = [br.acquire() for _ in range(4)]
    assert permits == [PROBE, PROBE, PROBE, None]
    br.record(True, 0.01, PROBE)
    br.record(False, 0.01, PROBE)
    br.record(True, 0.01, PROBE)
    assert br.state is State.OPEN and br.current_wait_s == 10.0
    c.t += 9.9
    assert br.state is State.OPEN
    c.t += 0.2
    assert br.state is State.HALF_OPEN
    for _ in range(3):
        assert br.acquire() == PROBE
        br.record(True, 0.01, PROBE)
    assert br.state is State.CLOSED and br.stats().calls == 0
    assert br.acquire() == NORMAL


def test_late_results_while_open_are_ignored():
    c = Clock()
    br = make(c, min_calls=10)
    feed(br, c, 0, 10)
    br.record(False, 0.01, NORMAL)
    c.t += 5.0
    br.record(True, 0.01, NORMAL)  # a normal call finishing in half-open is not a probe
    assert br.state is State.HALF_OPEN


def test_forced_open_holds_until_reset():
    c = Clock()
    br = make(c)
    br.force_open("rollback")
    c.t += 3600
    assert br.state is State.FORCED_OPEN and br.acquire() is None
    assert br.trip("oom") is None and br.state is State.FORCED_OPEN
    br.reset("operator")
    assert br.state is State.CLOSED
    assert [t.dst for t in br.transitions] == [State.FORCED_OPEN, State.CLOSED]


def test_trip_while_open_restarts_wait_without_a_transition():
    c = Clock()
    br = make(c)
    br.trip("leak")
    c.t += 4.0
    assert br.trip("leak") is None
    c.t += 4.0
    assert br.state is State.OPEN
    assert len(br.transitions) == 1
