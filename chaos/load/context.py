"""Per-process state every Locust user of the harness shares: the configuration, its share of the workload,
the arrival schedule and the record file (chaos.load.locustfile sets it up; chaos.load.users reads it)."""
from __future__ import annotations

import json
import os
import random
import socket
import time
from pathlib import Path

import gevent
from locust.env import Environment
from locust.runners import LocalRunner, WorkerRunner

from chaos.load import pacing
from chaos.load.backoff import Backoff
from chaos.load.config import LoadConfig
from chaos.load.records import RequestRecord, record_line
from chaos.load.workloads import ListWorkload, Prompt, make_workload
from chaos.shared.cpu_watch import own_schedstat

EXHAUSTED = "chaos_workload_exhausted"  # worker -> master: my share of a finite workload is sent


class Context:
    """Per-process state shared by all users: config, workload, pacing and the record file."""

    def __init__(self, cfg: LoadConfig) -> None:
        self.cfg = cfg
        self.workload = make_workload(cfg.workload, mix=cfg.mix, classes=cfg.classes, seed=cfg.seed,
                                      n=cfg.workload_n, path=cfg.prompts_file, special_share=cfg.special_share,
                                      prompt_set=cfg.answers)
        self.policy = cfg.retry_policy()
        self.environment: Environment | None = None
        self.schedule: pacing.ArrivalSchedule | None = None
        self.inflight = 0
        out = Path(cfg.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        self.path = out / f"records-{socket.gethostname()}-{os.getpid()}.jsonl"
        self._buf: list[str] = []
        self._file = open(self.path, "a", encoding="utf-8")
        self._flusher = gevent.spawn(self._flush_loop)
        self._t_start: tuple[float, float] | None = None
        self._sched_start: tuple[float, float] | None = None  # (CPU s, run-queue wait s) when users started
        self._shared = self._told = False

    def backoff(self, rng: random.Random) -> Backoff | None:
        return Backoff(self.policy, rng) if self.policy is not None else None

    def pace(self) -> float | None:
        """Seconds to wait for the next arrival (rate shape), 0 otherwise; None when spent."""
        if self.cfg.shape != "rate":
            return 0.0
        if self.schedule is None:
            index = getattr(getattr(self.environment, "runner", None), "worker_index", 0) or 0
            workers = max(1, self.cfg.workers)
            self.schedule = pacing.ArrivalSchedule(pacing.poisson_offsets(
                self.cfg.rate_per_s / workers, self.cfg.duration_s, seed=self.cfg.seed * 7919 + index))
        return self.schedule.delay()

    def emit(self, rec: RequestRecord) -> None:
        self._buf.append(record_line(rec))

    def flush(self) -> None:
        if self._buf:
            buf, self._buf = self._buf, []
            self._file.write("\n".join(buf) + "\n")
            self._file.flush()

    def _flush_loop(self) -> None:
        while True:
            gevent.sleep(self.cfg.flush_s)
            self.flush()

    def next_prompt(self) -> Prompt | None:
        """The next prompt of this process's share of the workload (None once it is spent)."""
        runner = getattr(self.environment, "runner", None)
        if not self._shared and isinstance(runner, WorkerRunner) and isinstance(self.workload, ListWorkload):
            self.workload.share(runner.worker_index, max(1, self.cfg.workers))  # known once connected
        self._shared = True
        return self.workload.next()

    def exhausted(self) -> None:
        """A finite workload ran out: a local run quits once nothing is in flight; a worker tells the
        master, which quits the run when every worker has said so."""
        runner = getattr(self.environment, "runner", None)
        if self.inflight != 0 or self._told:
            return
        self._told = True
        if isinstance(runner, LocalRunner):
            gevent.spawn_later(0.05, runner.quit)
        elif isinstance(runner, WorkerRunner):
            self.flush()
            # locust annotates `data` as a dict; it sends any msgpack-able value (on_exhausted reads an int)
            runner.send_message(EXHAUSTED, runner.worker_index)  # type: ignore[arg-type]

    def mark_start(self) -> None:
        """Users start now: the CPU, wall and run-queue clocks write_meta measures from."""
        self._t_start = (time.process_time(), time.perf_counter())
        self._sched_start = own_schedstat()

    def write_meta(self) -> None:
        """`meta-<host>-<pid>.json`: this process's CPU and wall seconds while users ran, and its run-queue
        wait (seconds runnable but waiting for a CPU; null where the kernel keeps no schedstat).

        A client near 1.0 CPU/wall is saturated: its timestamps then include its own queueing. One that
        waited far longer than it ran was starved by its host (chaos.shared.cpu_watch).
        """
        if self._t_start is None:
            return
        cpu, wall = time.process_time() - self._t_start[0], time.perf_counter() - self._t_start[1]
        now = own_schedstat()
        wait = now[1] - self._sched_start[1] if now is not None and self._sched_start is not None else None
        meta = {"cpu_s": cpu, "wall_s": wall, "wait_s": wait, "pid": os.getpid()}
        (self.path.parent / self.path.name.replace("records-", "meta-").replace(".jsonl", ".json")).write_text(
            json.dumps(meta), encoding="utf-8")

    def close(self) -> None:
        self.flush()
        self._flusher.kill(block=False)
        self._file.close()
