"""Continuous-batching scheduler modelled on vLLM's V1 scheduler.

Each step: running requests first (decode, or the next chunk of a prefill), then waiting
requests while there is room under `max_num_seqs` and the per-step token budget
(`max_num_batched_tokens`; chunked prefill always on). A waiting request first reuses the
longest cached prefix (whole blocks, never the last prompt token). When a running request
needs a block and none is free, the LAST running request is preempted by RECOMPUTE: its blocks
are freed, its progress reset, and it goes back to the front of the queue.

`decode_stalled` (the `decode-stall` fault) skips every running request that has its first token:
prefill and admission go on, decode never comes (vLLM issue 45094's deadlock, seen from outside).
"""
from __future__ import annotations

from collections import deque
from typing import Any

from chaos.stack.sim.kvcache import Block, BlockPool, chain_hashes


class Request:
    """One sequence as the scheduler sees it (prompt + generated tokens, KV blocks, timing)."""

    __slots__ = (
        "id", "tokens", "num_prompt", "max_tokens", "eos_len", "num_computed", "blocks",
        "hashes", "num_cached_blocks", "num_output", "finish_reason", "arrival",
        "t_scheduled", "t_first_token", "t_last_token", "paused_until", "gen", "owner",
    )

    def __init__(self, req_id: str, prompt: list[str], max_tokens: int, eos_len: int,
                 arrival: float = 0.0, gen: Any = None, owner: Any = None) -> None:
        self.id = req_id
        self.tokens = list(prompt)
        self.num_prompt = len(prompt)
        self.max_tokens = max_tokens
        self.eos_len = eos_len
        self.num_computed = 0
        self.blocks: list[Block] = []
        self.hashes: list[int] = []
        self.num_cached_blocks = 0
        self.num_output = 0
        self.finish_reason: str | None = None
        self.arrival = arrival
        self.t_scheduled: float | None = None
        self.t_first_token: float | None = None
        self.t_last_token = 0.0
        self.paused_until = 0.0
        self.gen = gen
        self.owner = owner

    def full_hashes(self, block_size: int) -> list[int]:
        """Chain hashes of every full block of the known tokens (extended lazily)."""
        n_full = len(self.tokens) // block_size
        if len(self.hashes) < n_full:
            parent = self.hashes[-1] if self.hashes else None
            self.hashes.extend(chain_hashes(self.tokens, block_size, parent, len(self.hashes)))
        return self.hashes


class StepPlan:
    """What one engine step computes, plus the batch shape the profile prices."""

    __slots__ = ("items", "prefill_tokens", "decode_seqs", "decode_ctx", "prefill_attn")

    def __init__(self) -> None:
        self.items: list[tuple[Request, int]] = []
        self.prefill_tokens = 0
        self.decode_seqs = 0
        self.decode_ctx = 0
        self.prefill_attn = 0.0

    def add(self, req: Request, n: int) -> None:
        start = req.num_computed
        self.items.append((req, n))
        if n == 1 and req.num_output > 0:
            self.decode_seqs += 1
            self.decode_ctx += start + 1
        else:
            self.prefill_tokens += n
            self.prefill_attn += n * (start + n / 2)


class Scheduler:
    """Continuous batching over a BlockPool; see the module docstring."""

    def __init__(self, pool: BlockPool, max_num_seqs: int, max_num_batched_tokens: int,
                 token_source: Any = None) -> None:
        self.pool = pool
        self.bs = pool.block_size
        self.max_num_seqs = max_num_seqs
        self.budget = max_num_batched_tokens
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.token_source = token_source or (lambda req, i: "tok")
        self.num_preemptions = 0
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.decode_stalled = False

    def add(self, req: Request) -> None:
        self.waiting.append(req)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self, now: float = 0.0) -> StepPlan:
        """Pick this step's batch; may preempt running requests when blocks run out."""
        plan = StepPlan()
        budget = self.budget
        preempted = False
        running = self.running
        i = 0
        while i < len(running) and budget > 0:
            req = running[i]
            if req.paused_until > now or (self.decode_stalled and req.num_output > 0):
                i += 1
                continue
            n = min(len(req.tokens) - req.num_computed, budget)
            need = -(-(req.num_computed + n) // self.bs) - len(req.blocks)
            self_preempted = False
            while need > self.pool.num_free:
                victim = running.pop()
                self._preempt(victim)
                preempted = True
                if victim is req:
                    self_preempted = True
                    break
            if self_preempted:
                break
            if need > 0:
                req.blocks.extend(self.pool.allocate(need) or ())
            plan.add(req, n)
            budget -= n
            i += 1
        if not preempted:
            budget = self._admit(plan, budget, now)
        return plan

    def _admit(self, plan: StepPlan, budget: int, now: float) -> int:
        pool, bs = self.pool, self.bs
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            req = self.waiting[0]
            num_tokens = len(req.tokens)
            hit: list[Block] = []
            if req.num_computed == 0:
                hit = pool.lookup(req.full_hashes(bs), (num_tokens - 1) // bs)
            hit_tokens = len(hit) * bs
            n = min(num_tokens - hit_tokens, budget)
            need = -(-(hit_tokens + n) // bs) - len(hit)
            if need + sum(1 for b in hit if b.ref == 0) > pool.num_free:
                break
            self.waiting.popleft()
            self.prefix_queries += num_tokens
            self.prefix_hits += hit_tokens
            pool.touch(hit)
            req.blocks = hit + (pool.allocate(need) or [])
            req.num_computed = hit_tokens
            req.num_cached_blocks = len(hit)
            if req.t_scheduled is None:
                req.t_scheduled = now
            self.running.append(req)
            plan.add(req, n)
            budget -= n
        return budget

    def _preempt(self, req: Request) -> None:
        self.pool.release(req.blocks)
        req.blocks = []
        req.num_computed = 0
        req.num_cached_blocks = 0
        self.num_preemptions += 1
        self.waiting.appendleft(req)

    def update(self, plan: StepPlan, now: float = 0.0) -> list[tuple[Request, str]]:
        """Apply a finished step: advance progress, cache full blocks, sample new tokens."""
        out: list[tuple[Request, str]] = []
        bs, pool, src = self.bs, self.pool, self.token_source
        any_finished = False
        for req, n in plan.items:
            if req.finish_reason is not None:
                continue
            req.num_computed += n
            full = req.num_computed // bs
            if full > req.num_cached_blocks:
                hashes = req.full_hashes(bs)
                for j in range(req.num_cached_blocks, min(full, len(req.blocks))):
                    pool.cache_block(req.blocks[j], hashes[j])
                req.num_cached_blocks = full
            if req.num_computed < len(req.tokens):
                continue
            tok = src(req, req.num_output)
            req.tokens.append(tok)
            req.num_output += 1
            if req.num_output >= req.max_tokens:
                req.finish_reason = "length"
            elif req.num_output >= req.eos_len:
                req.finish_reason = "stop"
            if req.finish_reason is not None:
                any_finished = True
                pool.release(req.blocks)
                req.blocks = []
            out.append((req, tok))
        if any_finished:
            self.running = [r for r in self.running if r.finish_reason is None]
        return out

    def abort(self, req: Request, reason: str = "abort") -> None:
        """Remove a request wherever it is and free its blocks."""
        if req.finish_reason is None:
            req.finish_reason = reason
        if req in self.waiting:
            self.waiting.remove(req)
        elif req in self.running:
            self.running.remove(req)
        if req.blocks:
            self.pool.release(req.blocks)
            req.blocks = []
