"""The engine loop: schedule a step, run the TP collective, wait out the modelled step time,
then emit every sequence's token in one pass (no per-token timers or tasks).

Steps keep an absolute schedule while busy (step n ends at the end of step n-1 plus its modelled
time), so timer granularity does not accumulate; a loop that falls more than 50 ms behind
restarts the schedule from now. Streaming responses are written straight to the connection's
transport as chunked-transfer frames; the request handler only wakes at the start and the end.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from typing import Any

from chaos.stack.sim import protocol as P
from chaos.stack.sim.faults import FaultSet
from chaos.stack.sim.metrics import Metrics
from chaos.stack.sim.profiles import Profile
from chaos.stack.sim.ring import Ring
from chaos.stack.sim.scheduler import Request, Scheduler
from chaos.stack.sim.tokenizer import TextGenerator

log = logging.getLogger("vllm.v1.engine.core")
_STOP, _LENGTH = b'"stop"', b'"length"'


class EngineDead(Exception):
    """Raised inside the loop when the engine must die; carries the log lines."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__(lines[-1] if lines else "engine dead")
        self.lines = lines


def _wait_until(t: float) -> None:
    """Block (without yielding to the loop) until perf_counter() reaches t: sleep, then spin."""
    perf = time.perf_counter
    left = t - perf()
    if left > 0.0003:
        time.sleep(left - 0.0002)
    while perf() < t:
        pass


class Stream:
    """Per-request emission state shared by the HTTP handler and the engine."""

    __slots__ = ("parsed", "req", "rid", "created", "fmt", "transport", "future", "parts",
                 "fault", "fault_at", "fault_arg", "outcome", "role_sent", "on_finish", "t_first_sent")

    def __init__(self, parsed: P.Parsed, rid: str, created: int, transport: Any,
                 future: asyncio.Future[str]) -> None:
        self.parsed = parsed
        self.rid, self.created = rid, created
        self.fmt = P.ChunkFormat(parsed.chat, rid, created, parsed.model,
                                 len(parsed.tokens) if parsed.continuous_usage else None) if parsed.stream else None
        self.transport = transport
        self.future = future
        self.parts: list[str] = []
        self.req: Request | None = None
        self.fault: str | None = None
        self.fault_at = -1
        self.fault_arg = 0.0
        self.outcome = ""
        self.role_sent = False
        self.on_finish: Any = None  # called once, before the last bytes go out (ground-truth log)
        self.t_first_sent: float | None = None  # wall clock when the first token's chunk was written


class Engine:
    """Continuous-batching engine core driving one Scheduler with a Profile's step times."""

    def __init__(self, sched: Scheduler, profile: Profile, time_scale: float, metrics: Metrics,
                 faults: FaultSet, gen: TextGenerator, max_model_len: int, tp: Any = None) -> None:
        self.max_model_len = max_model_len
        self.sched, self.profile, self.time_scale = sched, profile, time_scale
        self.metrics, self.faults, self.gen, self.tp = metrics, faults, gen, tp
        self.enc = {w: json.dumps(w).encode() for w in gen.words}
        self.streams: set[Stream] = set()
        self.dead = False
        self.dead_reason: EngineDead | None = None
        self.hung = False
        self._wake = asyncio.Event()
        self._deadline = 0.0
        self.steps = 0
        self.lags = Ring(200_000)  # every chunk write vs its step's end (signed)
        self.step_lags = Ring(20_000)  # how late the loop woke for a step
        self._prep_s = 0.0  # EWMA of the bookkeeping before a step's writes
        self._burst_s = 0.0  # EWMA of how long one step's socket writes take
        self._wake_late = deque([0.0], maxlen=64)  # how late recent early wake-ups came
        self._batch: tuple[list[tuple[Any, bytes]], list[Stream]] | None = None
        self.on_death: Any = None
        sched.token_source = lambda req, i: gen.token(req.gen, i)

    # -- requests ---------------------------------------------------------------------------
    def submit(self, s: Stream, now: float) -> None:
        p = s.parsed
        base = TextGenerator.base_for(p.tokens)
        drift = self.faults.get("answer-drift")
        if drift is not None and self.faults.coin(drift["fraction"]):
            base = (base + 7_777_777) & 0x7FFFFFFF  # another stretch of the word sequence: another answer
        eos = 1 << 30 if p.ignore_eos else TextGenerator.natural_length(base)
        max_tokens = min(p.max_tokens or (1 << 30), self.max_model_len - len(p.tokens))
        req = Request(s.rid, p.tokens, max(1, max_tokens), eos, arrival=now, gen=base, owner=s)
        s.req = req
        for mode in ("stall", "truncate", "error-chunk"):
            f = self.faults.get(mode)
            if f is not None and self.faults.coin(f["fraction"]):
                s.fault, s.fault_at, s.fault_arg = mode, f["after_tokens"], f.get("seconds", 0.0)
                break
        self.streams.add(s)
        self.sched.add(req)
        self._wake.set()

    def abort(self, s: Stream) -> None:
        if s.req is not None and s.req.finish_reason is None:
            self.sched.abort(s.req)
            self._finish(s, "abort", time.time(), write=False)

    def set_hang(self, on: bool) -> None:
        self.hung = on
        self._wake.set()

    def set_decode_stall(self, on: bool) -> None:
        self.sched.decode_stalled = on
        self._wake.set()

    # -- loop -------------------------------------------------------------------------------
    async def run(self) -> None:
        try:
            while not self.dead:
                if self.hung or not self.sched.has_work():
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                await self._step()
        except EngineDead as e:
            self.die(e.lines)

    async def _step(self) -> None:
        perf, wall = time.perf_counter(), time.time()
        plan = self.sched.schedule(wall)
        if not plan.items:  # everything running is paused by a stall fault
            self._deadline = 0.0
            if self.sched.decode_stalled:  # nothing to do until a new request or the revert wakes us
                self._wake.clear()
                await self._wake.wait()
            else:
                await asyncio.sleep(0.005)
            return
        dt = self.profile.step_time(plan.prefill_tokens, plan.decode_seqs, plan.decode_ctx,
                                    plan.prefill_attn) * self.time_scale
        slow = self.faults.get("slow")
        if slow is not None:
            dt = max(dt, 0.001 * self.time_scale) * slow["factor"]
        # steps chain on the previous step's end (which the centred writes may precede)
        start = self._deadline if dt > 0 and -0.05 < perf - self._deadline < 0.05 else perf
        deadline = start + dt
        self.steps += 1
        if self.tp is not None:
            await self.tp.collective(self.steps)
        # Wake early (by the bookkeeping time plus a guard for a late wake-up), build the
        # frames, then wait without yielding so no request handler can run into the deadline.
        # The writes are centred on the deadline: the step's first chunks go out up to half a
        # burst early and its last ones half a burst late, the least error a serial burst allows.
        guard = min(0.004, max(0.0005, max(self._wake_late)))
        flush_at = deadline - self._burst_s / 2
        wake_at = flush_at - self._prep_s - guard
        delay = wake_at - time.perf_counter()
        await asyncio.sleep(delay if delay > 0 else 0)
        if self.dead:
            return
        if self.hung:  # hang hit mid-step: the step never completes
            self._deadline = 0.0
            return
        self._deadline = deadline
        t0 = time.perf_counter()
        if delay > 0:
            self._wake_late.append(max(0.0, t0 - wake_at))
            self.step_lags.append(t0 - wake_at)
        writes, done, firsts = self._prepare(plan, time.time() + max(0.0, deadline - t0))
        t1 = time.perf_counter()
        self._prep_s = 0.8 * self._prep_s + 0.2 * min(t1 - t0, 0.005)
        wait = flush_at - t1
        if wait > guard + 0.001:  # woke far too early (clock jump): yield again
            await asyncio.sleep(wait - guard)
            if self.dead:
                return
        _wait_until(flush_at)
        self._flush(writes, done, deadline, firsts)

    def _flush(self, writes: list[tuple[Any, bytes]], done: list[Stream], deadline: float,
               firsts: list[tuple[Any, bytes, Stream]]) -> None:
        lags, perf = self.lags, time.perf_counter
        t0 = perf()
        if firsts:
            # first tokens go first, and the request log gets the moment they were handed to the
            # kernel: the ground truth a client's TTFT is checked against
            to_wall = time.time() - t0
            for tr, data, st in firsts:
                if not tr.is_closing():
                    # stamped as the write starts: a client may read the chunk before write() returns,
                    # and a stamp taken after it carries any preemption in between (seen: -2.6 ms)
                    t = perf()
                    tr.write(data)
                    st.t_first_sent = t + to_wall
                    lags.append(t - deadline)
        for tr, data in writes:
            if not tr.is_closing():
                tr.write(data)
                lags.append(perf() - deadline)
        if writes or firsts:
            self._burst_s = 0.8 * self._burst_s + 0.2 * min(perf() - t0, 0.01)
        for st in done:
            if not st.future.done():
                st.future.set_result(st.outcome)

    def _prepare(self, plan: Any, wall: float) -> tuple[list[tuple[Any, bytes]], list[Stream], list[tuple[Any, bytes, Stream]]]:
        """Apply the step and build every chunk frame; nothing is written yet."""
        outs = self.sched.update(plan, wall)
        writes: list[tuple[Any, bytes]] = []
        firsts: list[tuple[Any, bytes, Stream]] = []
        done: list[Stream] = []
        self._batch = (writes, done)
        m, enc = self.metrics, self.enc
        m.generation_tokens += len(outs)
        itl_obs, add = m.itl.observe, writes.append
        for req, tok in outs:
            s: Stream = req.owner
            if req.num_output == 1:
                req.t_first_token = wall
                m.prompt_tokens += req.num_prompt
                m.ttft.observe(wall - req.arrival)
            else:
                itl_obs(wall - req.t_last_token)
            req.t_last_token = wall
            fin = req.finish_reason
            if s.fault is not None and self._fault_hit(s, req, wall):
                continue
            tr = s.transport
            if tr.is_closing():  # the client left: vLLM's disconnect watcher aborts, streamed or not
                self.sched.abort(req)
                self._finish(s, "abort", wall, write=False)
                continue
            if s.fmt is None:
                s.parts.append(tok)
                if fin is not None:
                    self._finish(s, fin, wall)
                continue
            if fin is None:
                data = s.fmt.token(enc[tok], count=req.num_output)
                if not s.role_sent and s.fmt.chat:
                    s.role_sent = True
                    data = s.fmt.role + data
                if req.num_output == 1:
                    firsts.append((tr, b"%x\r\n%b\r\n" % (len(data), data), s))
                else:
                    add((tr, b"%x\r\n%b\r\n" % (len(data), data)))
            else:
                self._finish(s, fin, wall, last=enc[tok])
        self._batch = None
        return writes, done, firsts

    def _fault_hit(self, s: Stream, req: Request, wall: float) -> bool:
        """Apply a stream's mid-stream fault once `fault_at` tokens went out; True = consumed."""
        mode = s.fault
        if mode == "stall":
            if req.num_output == max(1, s.fault_at):
                req.paused_until = wall + s.fault_arg
                s.fault = None
            return False
        if req.num_output - 1 != s.fault_at:
            return False
        s.fault = None
        self.sched.abort(req, "error")
        if mode == "truncate":
            s.transport.close()
            self._finish(s, "error", wall, write=False, truncated=True)
        else:
            if s.fmt is not None:
                ev = P.error_event(500, P.ENGINE_DEAD_MESSAGE) + P.DONE
                s.transport.write(P.frame(ev))
            self._finish(s, "error", wall, write=False)
        return True

    def _finish(self, s: Stream, reason: str, wall: float, write: bool = True,
                last: bytes | None = None, truncated: bool = False) -> None:
        req = s.req
        self.streams.discard(s)
        if req is not None:
            # Stream <-> Request is a reference cycle holding the prompt's tokens; with the
            # collector tuned down (server.py) a finished request would otherwise keep them for
            # thousands of requests, and RSS would climb like a leak under long prompts
            req.owner = None
            t_sched = req.t_scheduled or wall
            t_first = req.t_first_token or wall
            self.metrics.observe_finished(reason, wall - req.arrival, t_sched - req.arrival,
                                          t_first - t_sched, wall - t_first, req.num_prompt,
                                          req.num_output)
        s.outcome = "truncated" if truncated else reason
        if s.on_finish is not None:
            # log before the client can see the end, so a SIGKILL never leaves a success the log lacks
            s.on_finish(s, wall)
            s.on_finish = None
        if write and s.fmt is not None and not s.transport.is_closing():
            fin = _STOP if reason == "stop" else _LENGTH
            parts = [s.fmt.role] if s.fmt.chat and not s.role_sent else []
            s.role_sent = True
            parts.append(s.fmt.token(last or b'""', fin, req.num_output if req is not None else 0))
            if s.parsed.include_usage and req is not None:
                parts.append(s.fmt.usage(req.num_prompt, req.num_output))
            parts.append(P.DONE)
            data = b"".join(parts)
            frame = b"%x\r\n%b\r\n" % (len(data), data)
            if self._batch is not None:
                self._batch[0].append((s.transport, frame))
            else:
                s.transport.write(frame)
        if self._batch is not None:
            self._batch[1].append(s)
        elif not s.future.done():
            s.future.set_result(s.outcome)

    # -- death ------------------------------------------------------------------------------
    def die(self, lines: list[str]) -> None:
        """Engine death: log, fail every in-flight request, stop stepping."""
        if self.dead:
            return
        self.dead = True
        self.dead_reason = EngineDead(lines)
        for line in lines:
            log.error(line)
        wall = time.time()
        for s in list(self.streams):
            if s.req is not None:
                self.sched.abort(s.req, "error")
            if s.fmt is not None and not s.transport.is_closing():
                s.transport.write(P.frame(P.error_event(500, P.ENGINE_DEAD_MESSAGE) + P.DONE))
            self._finish(s, "error", wall, write=False)
        self._wake.set()
        if self.on_death is not None:
            self.on_death()
