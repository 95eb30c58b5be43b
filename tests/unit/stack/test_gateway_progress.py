"""Progress ejection (chaos.stack.gateway.progress) on a fake clock: a replica holding running requests that
decodes nothing for stall_s is taken out; new requests' first tokens, idleness, a restart's counter reset and
unreadable counters never are."""
from __future__ import annotations

from chaos.stack.gateway.ejection import Ejection
from chaos.stack.gateway.progress import ProgressWatch, parse_progress

PAGE = b"""# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 1.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 120.0
vllm:generation_tokens_total{engine="1",model_name="m"} 30.0
"""


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def feed(watch: ProgressWatch, clock: Clock, reads: list[tuple[float, float] | None], every_s: float = 0.5) -> list[float]:
    out = []
    for r in reads:
        out.append(watch.observe("a", r))
        clock.t += every_s
    return out


def test_parse_sums_engines_and_needs_both_counters() -> None:
    assert parse_progress(PAGE) == (150.0, 4.0)
    assert parse_progress(b"vllm:num_requests_running 2.0\n") is None and parse_progress(b"") is None


def test_first_tokens_are_not_decode_progress() -> None:
    # the TTFT histogram's count: one per first token, which a stalled engine still gives its new requests
    page = PAGE + b'vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 40.0\n' \
                  b'vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 40.0\n'
    assert parse_progress(page) == (110.0, 4.0)


def test_a_replica_that_holds_requests_and_decodes_nothing_is_ejected_after_stall_s() -> None:
    clock = Clock()
    e = Ejection(hold_s=10.0, clock=clock)
    w = ProgressWatch(e, stall_s=2.0, clock=clock)
    # decoding at 100 tokens/s with 4 running, then the counter stops (one first token of an arrival at 3 s)
    reads = [(50.0 * i, 4.0) for i in range(4)] + [(150.0, 4.0), (150.0, 4.0), (151.0, 5.0), (151.0, 5.0), (151.0, 5.0)]
    stalled = feed(w, clock, reads)
    assert stalled[:4] == [0.0] * 4 and stalled[4:8] == [0.5, 1.0, 1.5, 2.0] and e.out("a")
    assert stalled[8] == 0.5  # still stalled: counted again from the ejection, not ejected twice at once
    assert e.progress_ejections["a"] == 1 and e.rotation(["a", "b"], str) == ["b"]


def test_progress_idleness_restarts_and_blind_reads_are_never_a_stall() -> None:
    clock = Clock()
    e = Ejection(hold_s=10.0, clock=clock)
    w = ProgressWatch(e, stall_s=1.0, clock=clock)
    slow = [(1.5 * i, 2.0) for i in range(10)]  # 3 tokens/s over 2 sequences: slow but decoding
    idle = [(20.0, 0.0)] * 10
    restart = [(500.0, 2.0), (0.0, 2.0), (40.0, 2.0)]
    blind = [(0.0, 2.0), None, None, None, None, (100.0, 2.0)]
    assert max(feed(w, clock, slow + idle + restart + blind)) == 0.0 and not e.out("a") and e.ejections == 0


def test_every_s_reads_a_few_times_per_stall() -> None:
    assert ProgressWatch(Ejection(), stall_s=3.5).every_s == 0.35
    assert ProgressWatch(Ejection(), stall_s=60.0).every_s == 0.5 and ProgressWatch(Ejection(), stall_s=0.5).every_s == 0.1


def test_a_read_after_a_blind_spell_or_a_new_setting_is_a_new_baseline() -> None:
    clock = Clock()
    e = Ejection(hold_s=10.0, clock=clock)
    w = ProgressWatch(e, stall_s=1.0, clock=clock)
    assert feed(w, clock, [(0.0, 2.0)] + [None] * 4 + [(0.0, 2.0), (0.0, 2.0)]) == [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5]
    w.configure(2.0)
    assert feed(w, clock, [(0.0, 2.0), (0.0, 2.0)]) == [0.0, 0.5] and not e.out("a")
