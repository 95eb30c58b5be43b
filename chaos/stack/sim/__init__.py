"""vLLM simulator: one replica = `python -m chaos.stack.sim` / `chaos sim`.

Modules: profiles (step-time models, calibration), config (flags resolved), tokenizer,
kvcache (blocks, prefix cache), scheduler (continuous batching, chunked prefill, recompute
preemption), engine (step loop and emission), tp/rank (rank worker processes, collective),
protocol (wire format), api (aiohttp routes), metrics, faults, reqlog, server (lifecycle), cli.
Kept import-free so rank workers (`python -m chaos.stack.sim.rank`) start fast.
"""
