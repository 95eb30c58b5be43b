"""Scheduler and KV-cache unit tests (no process, virtual clock)."""
from __future__ import annotations

import random

from chaos.stack.sim.kvcache import BlockPool, chain_hashes
from chaos.stack.sim.profiles import PROFILES
from chaos.stack.sim.scheduler import Request, Scheduler
from chaos.stack.sim.virtual import run_closed_loop, shared_prefix_prompts, unique_prompts


def _req(name: str, n_prompt: int, max_tokens: int = 4, prefix: str | None = None) -> Request:
    toks = [f"{prefix or name}{i}" for i in range(n_prompt)]
    return Request(name, toks, max_tokens, 1 << 30)


def _drain(s: Scheduler, limit: int = 10_000) -> int:
    steps = 0
    while s.has_work() and steps < limit:
        s.update(s.schedule())
        steps += 1
    return steps


def test_batch_respects_max_num_seqs_and_token_budget() -> None:
    s = Scheduler(BlockPool(1000, 16), max_num_seqs=3, max_num_batched_tokens=100)
    for i in range(5):
        s.add(_req(f"r{i}", 30))
    plan = s.schedule()
    assert len(plan.items) == 3 and len(s.waiting) == 2
    assert sum(n for _, n in plan.items) <= 100
    assert [n for _, n in plan.items] == [30, 30, 30]


def test_chunked_prefill_splits_long_prompt() -> None:
    s = Scheduler(BlockPool(1000, 16), max_num_seqs=4, max_num_batched_tokens=64)
    r = _req("long", 200)
    s.add(r)
    chunks = []
    while r.num_output == 0:
        plan = s.schedule()
        chunks.append(plan.items[0][1])
        s.update(plan)
    assert chunks == [64, 64, 64, 8]
    plan = s.schedule()
    assert plan.items == [(r, 1)] and plan.decode_seqs == 1


def test_decode_and_prefill_mix_in_one_step() -> None:
    s = Scheduler(BlockPool(1000, 16), max_num_seqs=4, max_num_batched_tokens=50)
    a = _req("a", 10, max_tokens=10)
    s.add(a)
    s.update(s.schedule())
    s.add(_req("b", 100))
    plan = s.schedule()
    assert [(r.id, n) for r, n in plan.items] == [("a", 1), ("b", 49)]


def test_prefix_cache_hit_on_shared_prefix() -> None:
    pool = BlockPool(100, 16)
    s = Scheduler(pool, max_num_seqs=4, max_num_batched_tokens=1000)
    first = Request("a", [f"p{i}" for i in range(64)] + ["x"], 2, 1 << 30)
    s.add(first)
    _drain(s)
    second = Request("b", [f"p{i}" for i in range(64)] + ["y"], 2, 1 << 30)
    s.add(second)
    plan = s.schedule()
    assert plan.items[0][1] == 1  # 64 tokens (4 blocks) came from the cache
    assert s.prefix_hits == 64 and s.prefix_queries == 65 * 2


def test_full_prompt_hit_still_computes_last_token() -> None:
    s = Scheduler(BlockPool(100, 16), max_num_seqs=4, max_num_batched_tokens=1000)
    toks = [f"p{i}" for i in range(32)]
    s.add(Request("a", toks, 1, 1 << 30))
    _drain(s)
    s.add(Request("b", list(toks), 1, 1 << 30))
    assert s.schedule().items[0][1] == 16  # block 2 can't be a hit: the last token must run


def test_lru_eviction_order() -> None:
    pool = BlockPool(4, 4)
    a, b = pool.allocate(2), pool.allocate(2)
    assert a is not None and b is not None
    ha, hb = chain_hashes(list("abcdefgh"), 4), chain_hashes(list("ijklmnop"), 4)
    for blk, h in zip(a + b, ha + hb, strict=True):
        pool.cache_block(blk, h)
    pool.release(a)  # freed first -> evicted first
    pool.release(b)
    pool.allocate(2)
    assert pool.lookup(ha, 2) == [] and len(pool.lookup(hb, 2)) == 2
    got = pool.lookup(hb, 2)
    pool.touch(got)  # a hit takes the blocks out of the free queue
    assert pool.num_free == 0


def test_chain_hash_depends_on_parent() -> None:
    x = chain_hashes(["a", "b", "c", "d"], 2)
    y = chain_hashes(["z", "z", "c", "d"], 2)
    assert x[1] != y[1]


def test_recompute_preemption_counted_and_completes() -> None:
    pool = BlockPool(12, 4)
    s = Scheduler(pool, max_num_seqs=8, max_num_batched_tokens=1000)
    reqs = [Request(f"r{i}", [f"r{i}t{j}" for j in range(8)], 12, 1 << 30) for i in range(4)]
    for r in reqs:
        s.add(r)
    _drain(s)
    assert s.num_preemptions > 0
    assert all(r.finish_reason == "length" and r.num_output == 12 for r in reqs)
    assert pool.num_free == 12


def test_prefix_sharing_saves_blocks_and_prefill_time() -> None:
    prof = PROFILES["a100-80g"]
    rng = random.Random(3)
    kw = dict(concurrency=8, total=1000, output_tokens=4, max_num_seqs=8, num_blocks=4096)
    shared = run_closed_loop(prof, shared_prefix_prompts(512, 448, 4, lambda i: rng.randrange(4)), **kw)
    unique = run_closed_loop(prof, unique_prompts(512), **kw)
    assert shared.prefix_hits > 0.8 * 448 * 1000 * 0.9
    assert shared.prefill_tokens < 0.3 * unique.prefill_tokens
    assert shared.prefill_time < 0.5 * unique.prefill_time
    assert shared.peak_blocks < unique.peak_blocks


def test_a100_profile_reproduces_seed_table() -> None:
    from chaos.stack.sim.virtual import calibration_lengths

    prof = PROFILES["a100-80g"]
    short = run_closed_loop(prof, unique_prompts(512), concurrency=8, total=200,
                            output_tokens=calibration_lengths(), warmup=8)
    long_ = run_closed_loop(prof, unique_prompts(8192), concurrency=8, total=60,
                            output_tokens=calibration_lengths(), warmup=8)
    assert abs(short.tok_s / 2800 - 1) < 0.15 and short.p99() < 0.35
    assert abs(long_.tok_s / 420 - 1) < 0.15 and abs(long_.p99() / 1.8 - 1) < 0.15


def test_decode_stall_runs_prefill_but_no_decode_and_revert_resumes() -> None:
    s = Scheduler(BlockPool(1000, 16), max_num_seqs=4, max_num_batched_tokens=64)
    s.decode_stalled = True
    a, b = _req("a", 100, max_tokens=8), _req("b", 10, max_tokens=8)
    s.add(a)
    s.add(b)
    for _ in range(10):
        s.update(s.schedule())
    # both prefilled (the long one in chunks) and got their first token, then nothing more
    assert (a.num_output, b.num_output) == (1, 1)
    assert s.running == [a, b] and not s.schedule().items
    s.decode_stalled = False
    _drain(s)
    assert (a.num_output, b.num_output) == (8, 8) and not s.running
