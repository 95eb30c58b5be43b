"""One simulator replica's lifecycle: startup (port closed until ready), faults, death, exit.

Startup: rank workers spawn and handshake, `--startup-delay` elapses, THEN the port is bound and
`Application startup complete.` is printed. Engine death (rank timeout, worker death,
engine-death, oom, tokenizer crash): in-flight requests fail, /health answers 503, and after
`death_exit_delay` (0.5 s, as measured on vLLM 0.32 here) the process exits with code 0.
`crash`: SIGKILL to the ranks and to itself (exit status 137).
"""
from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from chaos.stack.sim.api import Api
from chaos.stack.sim.config import SimConfig
from chaos.stack.sim.engine import Engine, EngineDead
from chaos.stack.sim.faults import FaultSet
from chaos.stack.sim.kvcache import BlockPool
from chaos.stack.sim.metrics import Metrics
from chaos.stack.sim.oom import OOM_LINE
from chaos.stack.sim.reqlog import RequestLog
from chaos.stack.sim.scheduler import Scheduler
from chaos.stack.sim.tokenizer import TextGenerator
from chaos.stack.sim.tp import RankGroup

log = logging.getLogger("vllm.entrypoints.openai.api_server")


class SimServer:
    """Wires config, engine, TP ranks, metrics, faults and the HTTP app together."""

    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        prof = cfg.resolved_profile()
        self.pool = BlockPool(cfg.num_gpu_blocks or 1, cfg.block_size, cfg.enable_prefix_caching)
        self.sched = Scheduler(self.pool, cfg.max_num_seqs or 1, cfg.max_num_batched_tokens or 1)
        self.metrics = Metrics(cfg.name, cfg.max_model_len or 1, {
            "block_size": str(cfg.block_size), "gpu_memory_utilization": "0.9",
            "enable_prefix_caching": str(cfg.enable_prefix_caching),
            "num_gpu_blocks": str(cfg.num_gpu_blocks)})
        self.faults = FaultSet(cfg.seed)
        self.reqlog = RequestLog(cfg.request_log)
        self.tp = (RankGroup(cfg.tp_ports, cfg.tp_connect, cfg.collective_timeout, self._worker_died, cfg.host)
                   if cfg.tensor_parallel_size > 1 else None)
        self.engine = Engine(self.sched, prof, cfg.time_scale, self.metrics, self.faults,
                             TextGenerator(cfg.seed), cfg.max_model_len or 1, self.tp)
        self.engine.on_death = self._on_death
        self.exit_code: asyncio.Future[int] | None = None
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._watchdog_origin = 0.0  # the loop time the HTTP server started; set in serve()
        self._site: web.TCPSite | None = None
        self._leaked: list[bytearray] = []
        self._tasks: list[asyncio.Task[None]] = []

    # -- lifecycle ---------------------------------------------------------------------------
    async def serve(self) -> int:
        loop = asyncio.get_running_loop()
        self.exit_code = loop.create_future()
        cfg = self.cfg
        log.info("vLLM API server version 0.11.0 (simulator) model=%s profile=%s tp=%d",
                 cfg.model, cfg.profile, cfg.tensor_parallel_size)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._exit, 0)
        app = web.Application(client_max_size=16 * 1024 * 1024)
        Api(self).routes(app)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            if self.tp is not None:
                self.tp.spawn()
                await self.tp.handshake()
                log.info("Tensor parallel workers ready: %s", self.tp.pids())
        except (TimeoutError, EngineDead) as e:
            msg = e.lines[0] if isinstance(e, EngineDead) else "rank handshake timed out"
            log.error("RuntimeError: Engine core initialization failed. %s", msg)
            self._shutdown()
            return 1
        if cfg.startup_delay:
            await asyncio.sleep(cfg.startup_delay)
        self._tasks.append(loop.create_task(self.engine.run()))
        self._tasks.append(loop.create_task(self._flush_log()))
        self._tasks.append(loop.create_task(self._stats_loop()))
        if self.tp is not None:
            self._tasks.append(loop.create_task(self.tp.monitor()))
        site = web.TCPSite(runner, cfg.host, cfg.port, backlog=2048, reuse_address=True)
        self._watchdog_origin = loop.time()  # vLLM creates its watchdog task just before serving HTTP
        self._site = site
        try:
            await site.start()
        except OSError as e:
            log.error("cannot listen on %s:%d: %s", cfg.host, cfg.port, e)
            self._shutdown()
            return 1
        for mode, params in cfg.faults:
            self.apply_fault(mode, params)
        gc.collect()
        gc.freeze()  # long-lived startup objects (KV blocks) leave the collector's scans
        gc.set_threshold(50_000, 50, 100)
        print("Application startup complete.", flush=True)
        code = await self.exit_code
        for t in self._tasks:
            t.cancel()
        self._shutdown()
        try:
            await asyncio.wait_for(runner.cleanup(), 1.0)
        except (TimeoutError, Exception):  # noqa: BLE001 - exiting anyway
            pass
        return code

    def _shutdown(self, kill: bool = False) -> None:
        if self.tp is not None:
            self.tp.stop(kill=True)
        self.reqlog.close()

    def _exit(self, code: int) -> None:
        if self.exit_code is not None and not self.exit_code.done():
            self.exit_code.set_result(code)

    def _worker_died(self, lines: list[str]) -> None:
        self.engine.die(lines)

    def _on_death(self) -> None:
        log.error("Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.")
        if self.tp is not None:
            self.tp.stop(kill=True)
        loop = asyncio.get_running_loop()
        period = self.cfg.watchdog_period
        to_tick = period - (loop.time() - self._watchdog_origin) % period
        loop.call_later(to_tick, self._watchdog_tick)

    def _watchdog_tick(self) -> None:
        """As uvicorn's shutdown: stop accepting connections now, exit after the teardown."""
        log.info("Engine is dead; shutting down the API server (exit 0).")
        loop = asyncio.get_running_loop()
        if self._site is not None:
            self._tasks.append(loop.create_task(self._site.stop()))
        loop.call_later(self.cfg.death_exit_delay, self._exit, 0)

    def crash(self) -> None:
        """A GPU Xid-style kill: no cleanup, non-zero exit."""
        log.error("CUDA error: an illegal memory access was encountered (Xid 79)")
        self.reqlog.flush()
        sys.stdout.flush()
        if self.tp is not None:
            for pid in self.tp.pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        os.kill(os.getpid(), signal.SIGKILL)

    # -- faults ------------------------------------------------------------------------------
    def apply_fault(self, mode: str, params: dict[str, Any]) -> None:
        self.faults.set(mode, params)
        log.warning("fault injected: %s %s", mode, params)
        actions: dict[str, Callable[[], object]] = {"crash": self.crash, "hang": lambda: self.engine.set_hang(True),
                   "decode-stall": lambda: self.engine.set_decode_stall(True),
                   "engine-death": lambda: self.engine.die(["EngineCore encountered a fatal error."]),
                   "oom": lambda: self.engine.die([OOM_LINE, "EngineCore encountered a fatal error."])}
        action = actions.get(mode)
        if action is not None:
            delay = params.get("after", 0.0)
            if mode == "crash":
                delay = max(delay, 0.05)  # let the admin response go out first
            old = self._timers.pop(mode, None)
            if old:
                old.cancel()
            if delay > 0:
                self._timers[mode] = asyncio.get_running_loop().call_later(delay, action)
            else:
                action()

    def revert_fault(self, mode: str) -> None:
        self.faults.clear(mode)
        t = self._timers.pop(mode, None)
        if t:
            t.cancel()
        if mode == "hang":
            self.engine.set_hang(False)
        elif mode == "decode-stall":
            self.engine.set_decode_stall(False)
        elif mode == "leak":
            self._leaked.clear()
        log.warning("fault reverted: %s", mode)

    def leak(self, nbytes: int) -> None:
        buf = bytearray(nbytes)
        buf[::4096] = b"\x01" * len(range(0, nbytes, 4096))  # touch every page so RSS grows
        self._leaked.append(buf)

    # -- observability -----------------------------------------------------------------------
    def render_metrics(self) -> bytes:
        s = self.sched
        return self.metrics.render(
            {"vllm:num_requests_running": len(s.running), "vllm:num_requests_waiting": len(s.waiting),
             "vllm:kv_cache_usage_perc": self.pool.usage()},
            {"vllm:num_preemptions": s.num_preemptions, "vllm:prefix_cache_queries": s.prefix_queries,
             "vllm:prefix_cache_hits": s.prefix_hits})

    def stats(self) -> dict[str, Any]:
        lags, wake = sorted(map(abs, self.engine.lags)), sorted(self.engine.step_lags)  # |error|: writes straddle the deadline

        def pick(q: float, xs: list[float] = lags) -> float:
            return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000 if xs else 0.0
        return {"pid": os.getpid(), "rank_pids": self.tp.pids() if self.tp else [],
                "steps": self.engine.steps, "dead": self.engine.dead, "hung": self.engine.hung,
                "running": len(self.sched.running), "waiting": len(self.sched.waiting),
                "free_blocks": self.pool.num_free, "num_blocks": self.pool.num_blocks,
                "preemptions": self.sched.num_preemptions, "emission_samples": len(lags),
                "emission_lag_ms": {"p50": pick(0.5), "p99": pick(0.99), "max": pick(1.0)},
                "wakeup_lag_ms": {"p50": pick(0.5, wake), "p99": pick(0.99, wake)},
                "leaked_bytes": sum(len(b) for b in self._leaked)}

    async def _flush_log(self) -> None:
        while True:
            await asyncio.sleep(0.05)
            self.reqlog.flush()

    async def _stats_loop(self) -> None:
        m, s = self.metrics, self.sched
        last_p, last_g, last_t, was_active = m.prompt_tokens, m.generation_tokens, time.time(), False
        while True:
            await asyncio.sleep(self.cfg.stats_interval)
            now = time.time()
            dt = max(1e-9, now - last_t)
            pr, gr = (m.prompt_tokens - last_p) / dt, (m.generation_tokens - last_g) / dt
            active = bool(pr or gr or s.running or s.waiting)
            if active or was_active:
                hit = 100.0 * s.prefix_hits / s.prefix_queries if s.prefix_queries else 0.0
                logging.getLogger("vllm.v1.metrics.loggers").info(
                    "Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: "
                    "%.1f tokens/s, Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, "
                    "Prefix cache hit rate: %.1f%%", pr, gr, len(s.running), len(s.waiting),
                    100.0 * self.pool.usage(), hit)
            last_p, last_g, last_t, was_active = m.prompt_tokens, m.generation_tokens, now, active
