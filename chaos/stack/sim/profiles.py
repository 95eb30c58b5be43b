"""Hardware profiles: the modelled time of one engine step as a function of the batch.

step_time = step_overhead                     (weights read + launch + sampling, per step)
          + per_token * batched_tokens        (GEMMs, linear in prefill + decode tokens)
          + attn_pair * (sum over decode seqs of context length
                         + sum over prefill chunks of chunk * (start + chunk / 2))

`--time-scale X` multiplies the result (0.1 = ten times faster than real time).

Calibration of `a100-80g` (seed-requirements.md, one A100-80G, `--max-num-seqs 8`):
the workload is a closed loop of 8 concurrent clients, every request a unique prompt of 512
(short) or 8192 (long) tokens and 48-80 output tokens (uniform, seeded, mean 64; sent as
`max_tokens` with `ignore_eos`), block size 16,
`max_num_batched_tokens` 2048. Throughput is OUTPUT tokens per second over the whole run; the
P99 is the P99 of per-request END-TO-END latency (arrival to last token) after a warm-up of 8
requests. Seed targets: short 2800 tok/s with P99 < 350 ms, long 420 tok/s with P99 about 1.8 s
(attention 68 % of long-prompt step time; the model gives ~60 %). The constants below were fitted with the virtual-
clock engine (`chaos.stack.sim.virtual.run_closed_loop`) and checked end-to-end over HTTP by
`bench/sim_bench.py` (in real time).
Virtual-clock result: short 2806 tok/s, P99 227 ms; long 425 tok/s, P99 1.83 s.
"""
from __future__ import annotations

from dataclasses import dataclass

from chaos.errors import ConfigError


@dataclass(frozen=True)
class Profile:
    """Step-time model and default engine sizes for one GPU type."""

    name: str
    step_overhead_s: float
    per_token_s: float
    attn_pair_s: float
    num_gpu_blocks: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int

    def step_time(self, prefill_tokens: int, decode_seqs: int, decode_ctx: int,
                  prefill_attn: float) -> float:
        """Modelled seconds for one step with this batch (before --time-scale)."""
        if self.step_overhead_s == 0.0 and self.per_token_s == 0.0:
            return 0.0
        return (self.step_overhead_s
                + self.per_token_s * (prefill_tokens + decode_seqs)
                + self.attn_pair_s * (decode_ctx + prefill_attn))


PROFILES: dict[str, Profile] = {
    "a100-80g": Profile("a100-80g", step_overhead_s=2.35e-3, per_token_s=5.95e-6,
                        attn_pair_s=2.6e-9, num_gpu_blocks=8192, max_num_seqs=8,
                        max_num_batched_tokens=2048, max_model_len=32768),
    "h200": Profile("h200", step_overhead_s=0.8e-3, per_token_s=7.0e-6,
                    attn_pair_s=2.0e-9, num_gpu_blocks=32768, max_num_seqs=256,
                    max_num_batched_tokens=8192, max_model_len=32768),
    "instant": Profile("instant", step_overhead_s=0.0, per_token_s=0.0, attn_pair_s=0.0,
                       num_gpu_blocks=65536, max_num_seqs=1024,
                       max_num_batched_tokens=16384, max_model_len=32768),
}


def get_profile(name: str) -> Profile:
    """The named profile, or ConfigError naming the choices."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ConfigError(f"--profile: unknown profile {name!r}; expected one of "
                          f"{', '.join(PROFILES)}") from None
