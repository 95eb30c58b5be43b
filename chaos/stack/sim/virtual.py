"""Virtual-clock engine: the real scheduler and profile, no HTTP and no sleeping.

Used to calibrate profiles and by scheduler tests (prefix-sharing savings, preemption).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from chaos.stack.sim.kvcache import BlockPool
from chaos.stack.sim.profiles import Profile
from chaos.stack.sim.scheduler import Request, Scheduler


@dataclass
class VirtualResult:
    """Outcome of a virtual run: latencies, token counts and cache figures."""

    e2e: list[float] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)
    output_tokens: int = 0
    duration: float = 0.0
    prefill_time: float = 0.0
    prefill_tokens: int = 0
    peak_blocks: int = 0
    preemptions: int = 0
    prefix_hits: int = 0
    prefix_queries: int = 0

    @property
    def tok_s(self) -> float:
        return self.output_tokens / self.duration if self.duration else 0.0

    def p99(self, values: list[float] | None = None) -> float:
        vals = sorted(self.e2e if values is None else values)
        return vals[min(len(vals) - 1, int(0.99 * len(vals)))] if vals else 0.0


def run_closed_loop(profile: Profile, prompts: Iterator[list[str]], *, concurrency: int,
                    total: int, output_tokens: int | Callable[[int], int], warmup: int = 0,
                    max_num_seqs: int | None = None, num_blocks: int | None = None,
                    block_size: int = 16, budget: int | None = None,
                    prefix_caching: bool = True) -> VirtualResult:
    """Run `total` requests, `concurrency` at a time, on a virtual clock."""
    pool = BlockPool(num_blocks or profile.num_gpu_blocks, block_size, prefix_caching)
    sched = Scheduler(pool, max_num_seqs or profile.max_num_seqs,
                      budget or profile.max_num_batched_tokens)
    res = VirtualResult()
    now, issued, done = 0.0, 0, 0
    t_start: float | None = None

    def issue() -> None:
        nonlocal issued
        n_out = output_tokens(issued) if callable(output_tokens) else output_tokens
        sched.add(Request(f"r{issued}", next(prompts), n_out, 1 << 30, arrival=now))
        issued += 1

    for _ in range(min(concurrency, total)):
        issue()
    while sched.has_work():
        plan = sched.schedule(now)
        dt = profile.step_time(plan.prefill_tokens, plan.decode_seqs, plan.decode_ctx,
                               plan.prefill_attn)
        share = plan.prefill_tokens / max(1, plan.prefill_tokens + plan.decode_seqs)
        res.prefill_time += dt * share
        res.prefill_tokens += plan.prefill_tokens
        res.peak_blocks = max(res.peak_blocks, pool.num_blocks - pool.num_free)
        now += max(dt, 1e-6)
        for req, _tok in sched.update(plan, now):
            if req.num_output == 1:
                req.t_first_token = now
            if req.finish_reason is None:
                continue
            done += 1
            if done == warmup:
                t_start = now
            if done > warmup:
                res.e2e.append(now - req.arrival)
                res.ttft.append((req.t_first_token or now) - req.arrival)
                res.output_tokens += req.num_output
            if issued < total:
                issue()
    res.duration = now - (t_start or 0.0)
    res.preemptions = sched.num_preemptions
    res.prefix_hits, res.prefix_queries = sched.prefix_hits, sched.prefix_queries
    return res


CALIBRATION_OUTPUT = (48, 80)


def calibration_lengths(seed: int = 0) -> Callable[[int], int]:
    """Output lengths of the calibration workload: uniform 48..80 (mean 64), seeded."""
    import random

    rng = random.Random(seed)
    table = [rng.randint(*CALIBRATION_OUTPUT) for _ in range(4096)]
    return lambda i: table[i % len(table)]


def unique_prompts(length: int, seed: int = 0) -> Iterator[list[str]]:
    """Endless prompts of `length` tokens that share nothing with each other."""
    i = seed
    while True:
        yield [f"u{i}_{j}" for j in range(length)]
        i += 1


def shared_prefix_prompts(length: int, prefix_len: int, n_prefixes: int,
                          pick: Callable[[int], int] | None = None) -> Iterator[list[str]]:
    """Endless prompts: one of `n_prefixes` shared prefixes + a unique suffix."""
    prefixes = [[f"p{k}_{j}" for j in range(prefix_len)] for k in range(n_prefixes)]
    i = 0
    while True:
        k = pick(i) if pick else i % n_prefixes
        yield prefixes[k] + [f"s{i}_{j}" for j in range(length - prefix_len)]
        i += 1
