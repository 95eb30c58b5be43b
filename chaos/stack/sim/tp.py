"""Engine side of tensor parallelism: rank worker processes and the per-step collective.

Every step the engine sends the 8-byte step number to each rank over TCP (possibly through a
Toxiproxy listener, `--tp-connect`) and waits for all echoes. No echo within
`--collective-timeout` -> vLLM's execute_model RPC timeout -> engine death. A rank process that
exits -> "Worker proc N died unexpectedly, shutting down executor." -> engine death. A link that
drops while the rank lives is redialled; the step just waits (as a stuck collective would).
"""
from __future__ import annotations

import asyncio
import logging
import os
import struct
import subprocess
import sys
from collections.abc import Callable

from chaos.stack.sim.engine import EngineDead

log = logging.getLogger("vllm.v1.executor.multiproc_executor")
_Q = struct.Struct("!Q")


class RankLink:
    """One rank: its process, its address and the echo it last returned."""

    def __init__(self, rank: int, listen_port: int, connect: tuple[str, int]) -> None:
        self.rank, self.listen_port, self.connect = rank, listen_port, connect
        self.proc: subprocess.Popen[bytes] | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.acked = 0
        self.task: asyncio.Task[None] | None = None


class RankGroup:
    """N-1 rank workers and the collective the engine runs with them every step."""

    def __init__(self, listen_ports: list[int], connect: list[tuple[str, int]], timeout: float,
                 on_worker_death: Callable[[list[str]], None], listen_host: str = "127.0.0.1") -> None:
        self.links = [RankLink(i + 1, p, c) for i, (p, c) in enumerate(zip(listen_ports, connect, strict=True))]
        # the server's own address: a rank link through a Toxiproxy on another host must reach it
        self.listen_host = listen_host
        self.timeout = timeout
        self.on_worker_death = on_worker_death
        self._step = 0
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False

    def spawn(self) -> None:
        for ln in self.links:
            cmd = [sys.executable, "-m", "chaos.stack.sim.rank", "chaos-sim-rank", "--rank",
                   str(ln.rank), "--host", self.listen_host, "--port", str(ln.listen_port), "--parent", str(os.getpid())]
            ln.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)

    def pids(self) -> list[int]:
        return [ln.proc.pid for ln in self.links if ln.proc is not None]

    async def handshake(self, deadline_s: float = 30.0) -> None:
        """Dial every rank (retrying while it starts) and run one collective."""
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline_s
        for ln in self.links:
            while not await self._dial(ln):
                self._check_procs()
                if loop.time() > end:
                    raise EngineDead([f"Engine core initialization failed: rank {ln.rank} at "
                                      f"{ln.connect[0]}:{ln.connect[1]} did not answer"])
                await asyncio.sleep(0.05)
        await self.collective(0, timeout=max(self.timeout, deadline_s))

    async def _dial(self, ln: RankLink) -> bool:
        try:
            reader, writer = await asyncio.open_connection(*ln.connect)
        except OSError:
            return False
        sock = writer.get_extra_info("socket")
        if sock is not None and sock.getsockname() == sock.getpeername():
            # TCP self-connect: dialling a port nobody listens on yet can pick that very port as
            # the source, and the socket then echoes itself: a "rank" that never freezes or dies
            writer.close()
            return False
        ln.writer = writer
        ln.task = asyncio.get_running_loop().create_task(self._read(ln, reader))
        return True

    async def _read(self, ln: RankLink, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                data = await reader.readexactly(8)
                ln.acked = _Q.unpack(data)[0]
                w = self._waiter
                if w is not None and not w.done() and all(x.acked >= self._step for x in self.links):
                    w.set_result(None)
        except (asyncio.IncompleteReadError, OSError):
            pass
        ln.writer = None
        if not self._closed:
            asyncio.get_running_loop().create_task(self._redial(ln))

    async def _redial(self, ln: RankLink) -> None:
        while not self._closed and ln.proc is not None and ln.proc.poll() is None:
            if await self._dial(ln):
                if ln.acked < self._step and ln.writer is not None:
                    ln.writer.write(_Q.pack(self._step))
                return
            await asyncio.sleep(0.2)

    async def collective(self, step: int, timeout: float | None = None) -> None:
        """One collective (numbered internally; `step` is the engine's) or EngineDead."""
        self._step += 1
        step = self._step
        timeout = timeout or self.timeout
        msg = _Q.pack(step)
        for ln in self.links:
            if ln.writer is not None:
                ln.writer.write(msg)
        if all(ln.acked >= step for ln in self.links):
            return
        loop = asyncio.get_running_loop()
        self._waiter = loop.create_future()
        warn = min(60.0, timeout / 2)
        start = loop.time()
        while True:
            remaining = timeout - (loop.time() - start)
            if remaining <= 0:
                raise EngineDead(self._timeout_lines())
            try:
                await asyncio.wait_for(asyncio.shield(self._waiter), min(warn, remaining))
                return
            except TimeoutError:
                if loop.time() - start < timeout:
                    log.warning("No available shared memory broadcast block found in %d seconds. "
                                "This typically happens when some processes are hanging or doing "
                                "some time-consuming work (e.g. compilation, weight/kv cache "
                                "quantization).", int(warn))

    def _timeout_lines(self) -> list[str]:
        late = [ln.rank for ln in self.links if ln.acked < self._step]
        return [f"[Rank 0] collective for step {self._step} timed out after {self.timeout:g} s "
                f"waiting for rank(s) {', '.join(map(str, late))}",
                "TimeoutError: RPC call to execute_model timed out.",
                "EngineCore encountered a fatal error."]

    def _check_procs(self) -> None:
        for ln in self.links:
            if ln.proc is not None and ln.proc.poll() is not None:
                raise EngineDead([f"Worker proc {ln.rank} died unexpectedly, shutting down executor.",
                                  "EngineCore encountered a fatal error."])

    async def monitor(self, interval: float = 0.1) -> None:
        """Watch the rank processes like vLLM's worker monitor thread."""
        while not self._closed:
            try:
                self._check_procs()
            except EngineDead as e:
                self.on_worker_death(e.lines)
                return
            await asyncio.sleep(interval)

    def stop(self, kill: bool = False) -> None:
        self._closed = True
        for ln in self.links:
            if ln.writer is not None:
                ln.writer.close()
            if ln.proc is not None and ln.proc.poll() is None:
                try:
                    ln.proc.kill() if kill else ln.proc.terminate()
                except OSError:
                    pass
        for ln in self.links:
            if ln.proc is not None:
                try:
                    ln.proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    ln.proc.kill()
