"""Run Locust headless in subprocesses (local, or one master + N workers), bounded in time.

Workers run here, on a lab host (`worker_host="lab-load"`: the load-host network namespace, their
traffic leaving from its address) or on any host over SSH (`ssh://user@host`); see placement.py.
Every process writes its own record file (an SSH worker's comes back over its session); the run
merges them as if one process had sent everything. A worker that dies mid-run is reported
(LoadResult.lost_workers) and the others carry on."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.errors import LoadError
from chaos.load.config import ENV_CONFIG, LoadConfig
from chaos.load.placement import RecordStream, job_line, worker_placement
from chaos.load.records import RequestRecord
from chaos.shared import proc as _proc
from chaos.shared.cpu_watch import CpuUse
from chaos.shared.proc import free_port

if TYPE_CHECKING:
    from chaos.load.stats import LoadStats

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
STARTUP_GRACE_S = 20.0
STOP_GRACE_S = 10.0


@dataclass
class LoadResult:
    """What a finished load run left: the merged records and where the raw files are."""

    records: list[RequestRecord]
    out_dir: Path
    returncodes: list[int | None]
    wall_s: float
    config: LoadConfig
    logs: list[Path] = field(default_factory=list)
    client_cpu: list[dict[str, Any]] = field(default_factory=list)  # per process: cpu_s, wall_s while users ran
    lost_workers: list[str] = field(default_factory=list)  # "worker-1 (killed by SIGKILL at 12.3 s)"

    @property
    def client_busy(self) -> float | None:
        """Highest CPU/wall share of one load process (near 1.0: saturated, timings inflated)."""
        shares = [m["cpu_s"] / m["wall_s"] for m in self.client_cpu if m.get("wall_s")]
        return max(shares) if shares else None

    def generator_cpu(self) -> dict[str, CpuUse | None]:
        """Each load process's CPU use while its users ran (None: it could not read its run-queue wait)."""
        return {f"load process {m.get('pid', i)}": CpuUse(float(m["cpu_s"]), float(m["wait_s"]), float(m["wall_s"]))
                if m.get("wait_s") is not None else None for i, m in enumerate(self.client_cpu)}

    @property
    def final(self) -> list[RequestRecord]:
        return [r for r in self.records if r.final]

    def stats(self, slos: dict[str, Any] | None = None) -> LoadStats:
        from chaos.load.stats import summarize

        return summarize(self.records, slos=slos)


def read_dir(out_dir: str | Path, live: bool = False) -> list[RequestRecord]:
    """Merged records of every records-*.jsonl in `out_dir`; `live` skips a half-written last line."""
    out: list[RequestRecord] = []
    for path in sorted(Path(out_dir).glob("records-*.jsonl")):
        text = path.read_text(encoding="utf-8")
        lines = text.split("\n")
        if live and not text.endswith("\n"):
            lines = lines[:-1]
        for i, line in enumerate(lines, 1):
            if line.strip():
                try:
                    out.append(RequestRecord.from_dict(json.loads(line)))
                except (ValueError, TypeError) as e:
                    raise LoadError(f"{path}:{i}: bad request record: {e}") from None
    out.sort(key=lambda r: r.t_send)
    return out


class LoadHandle:
    """A running load: `.records()` while it runs, `.stop()`, `.wait()` -> LoadResult."""

    def __init__(self, cfg: LoadConfig, base_url: str, out_dir: Path, workers: int,
                 worker_host: str | None = None, worker_python: str | None = None) -> None:
        self.cfg, self.base_url, self.out_dir, self.workers = cfg, base_url, out_dir, workers
        self.placement = worker_placement(worker_host, worker_python)
        self.streams: dict[int, RecordStream] = {}  # index -> what an ssh worker sends back
        self.procs: list[subprocess.Popen[bytes]] = []
        self.names: list[str] = []
        self._ended: dict[int, float] = {}  # index -> seconds into the run when a worker process ended
        self.logs: list[Path] = []
        self._files: list[Any] = []
        self.t_start = time.monotonic()
        self.deadline = self.t_start + cfg.duration_s + STARTUP_GRACE_S + STOP_GRACE_S
        self._result: LoadResult | None = None
        self._offsets: dict[Path, int] = {}
        self._n = self._errors = 0

    def _spawn(self, name: str, args: list[str], prefix: list[str] | None = None) -> subprocess.Popen[bytes]:
        log = self.out_dir / f"locust-{name}.log"
        f = open(log, "wb")
        self._files.append(f)
        self.logs.append(log)
        env = dict(os.environ, **{ENV_CONFIG: str(self.out_dir / "load-config.json")})
        env.pop("CHAOS_LOAD_OUT_DIR", None)
        cmd = [*(prefix or []), sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--loglevel", "WARNING", *args]
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env,
                             process_group=_proc.STACK_PROCESS_GROUP,  # the load shares the stack's scheduling group
                             preexec_fn=_sigint_default)
        self.procs.append(p)
        self.names.append(name)
        return p

    def _spawn_ssh(self, name: str, master_port: int) -> None:
        """A worker on an ssh:// host: the job goes over its stdin, its records come back on stdout."""
        log = self.out_dir / f"locust-{name}.log"
        f = open(log, "wb")
        self._files.append(f)
        self.logs.append(log)
        p = subprocess.Popen(self.placement.ssh_command(master_port, free_port()), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=f, start_new_session=True)
        self.procs.append(p)
        self.names.append(name)
        assert p.stdin is not None and p.stdout is not None
        self.streams[len(self.procs) - 1] = stream = RecordStream(p.stdout, self.out_dir)
        stream.start()
        try:
            p.stdin.write(job_line(self.out_dir / "load-config.json", self.cfg.prompts_file))
            p.stdin.flush()  # and kept open: its end tells the worker that the harness went away
        except OSError:
            pass  # ssh already failed: its log says why (_await_ssh_workers)

    def _await_ssh_workers(self, timeout_s: float = 30.0) -> None:
        """Every ssh worker started locust, else one line naming the host and what ssh said."""
        deadline = time.monotonic() + timeout_s
        for i, stream in self.streams.items():
            while not stream.ready.wait(0.1):
                p = self.procs[i]
                if p.poll() is not None or time.monotonic() > deadline:
                    self._files[i].flush()
                    why = self._last_log_line(i) or (f"ssh exited with {p.returncode}" if p.returncode is not None
                                                     else f"no answer within {timeout_s:g} s")
                    raise LoadError(f"worker host {self.placement.where}: {self.names[i]} did not start: {why}")

    def worker_pids(self) -> dict[str, int]:
        """The worker processes by name ("worker-0": pid), for a test that kills one."""
        return {n: p.pid for n, p in zip(self.names, self.procs, strict=True) if n.startswith("worker-")}

    def start(self) -> LoadHandle:
        self.cfg.save(self.out_dir / "load-config.json")
        common = ["--headless", "--host", self.base_url, "--only-summary", "--exit-code-on-error", "0",
                  "--stop-timeout", str(max(1, int(min(self.cfg.timeout_s, 5.0))))]
        try:
            if self.workers <= 0:
                self._spawn("local", common)
            else:
                port, where = free_port(), self.placement
                self._spawn("master", [*common, "--master", "--master-bind-host", where.master_host,
                                       "--master-bind-port", str(port), "--expect-workers", str(self.workers)])
                for i in range(self.workers):
                    if where.remote:
                        self._spawn_ssh(f"worker-{i}", port)
                    else:
                        self._spawn(f"worker-{i}", ["--worker", "--master-host", where.master_host,
                                                    "--master-port", str(port)], where.prefix)
                self._await_ssh_workers()
        except OSError as e:
            self._kill_all()
            raise LoadError(f"cannot start locust: {e}") from None
        except LoadError:
            self._kill_all()
            raise
        return self

    def running(self) -> bool:
        alive = False
        for i, p in enumerate(self.procs):
            if p.poll() is None:
                alive = True
            elif i not in self._ended:
                self._ended[i] = time.monotonic() - self.t_start
        return alive

    def _lost_workers(self) -> list[str]:
        """Workers that died before the run ended (the master and the rest went on without them)."""
        master_end = self._ended.get(0, float("inf"))
        out = []
        for i, (name, p) in enumerate(zip(self.names, self.procs, strict=True)):
            rc, ended = p.returncode, self._ended.get(i)
            if not name.startswith("worker-") or rc in (0, None) or ended is None or ended >= master_end - 0.5:
                continue
            out.append(f"{name} ({self._how_ended(i, rc)} at {ended:.1f} s)")
        return out

    def _how_ended(self, i: int, rc: int) -> str:
        if rc < 0:
            return f"killed by {signal.Signals(-rc).name}"
        if i in self.streams and rc == 255:  # ssh's own failure: the connection, not the worker
            return f"ssh to {self.placement.where} failed: {self._last_log_line(i) or 'exit 255'}"
        if i in self.streams and rc > 128 and rc - 128 in signal.valid_signals():  # ssh_worker: 128 + N
            return f"killed by {signal.Signals(rc - 128).name} on {self.placement.where}"
        return f"exited with {rc}"

    def _last_log_line(self, i: int) -> str:
        lines = [ln.strip() for ln in self.logs[i].read_text(errors="replace").splitlines() if ln.strip()]
        return lines[-1] if lines else ""

    def records(self) -> list[RequestRecord]:
        """Records written so far (flushed every `flush_s`)."""
        return read_dir(self.out_dir, live=True)

    def progress(self) -> tuple[int, int]:
        """(attempts, failed attempts) so far, read incrementally from the record files (cheap)."""
        for path in Path(self.out_dir).glob("records-*.jsonl"):
            off = self._offsets.get(path, 0)
            with open(path, "rb") as f:
                f.seek(off)
                chunk = f.read()
            end = chunk.rfind(b"\n") + 1
            self._offsets[path] = off + end
            self._n += chunk.count(b"\n", 0, end)
            self._errors += chunk.count(b'"error":"', 0, end)
        return self._n, self._errors

    def stop(self) -> LoadResult:
        """Ask the run to end now (SIGINT: locust stops its users and flushes), then wait.

        Not SIGTERM: locust 2.47 died of it here (exit -15) before its handler ran, so the records
        buffered since the last flush, and the final record of every request cut short, were lost."""
        for p in self.procs[:1]:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        self.deadline = min(self.deadline, time.monotonic() + STOP_GRACE_S)
        return self.wait()

    def wait(self, timeout_s: float | None = None) -> LoadResult:
        """Wait for the end (hard-killing anything past the deadline) and merge the records."""
        if self._result is not None:
            return self._result
        deadline = self.deadline if timeout_s is None else min(self.deadline, time.monotonic() + timeout_s)
        while self.running() and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.running():
            for p in self.procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGINT)  # see stop()
            end = time.monotonic() + 3.0
            while self.running() and time.monotonic() < end:
                time.sleep(0.05)
        self.running()  # note when the last ones ended
        lost = self._lost_workers()
        self._kill_all()
        for stream in self.streams.values():
            stream.join(5.0)  # the last lines an ssh worker sent before its session ended
        for f in self._files:
            f.close()
        rcs = [p.returncode for p in self.procs]
        records = read_dir(self.out_dir, live=True)
        bad = [(p, rc) for p, rc in zip(self.logs, rcs, strict=False) if rc not in (0, 1, -signal.SIGTERM, -signal.SIGINT, None)]
        if not records and bad:
            tail = bad[0][0].read_text(errors="replace").strip().splitlines()[-5:]
            raise LoadError(f"locust exited with {bad[0][1]} and left no records; {bad[0][0]}: {' | '.join(tail)}")
        metas = []
        for meta in sorted(self.out_dir.glob("meta-*.json")):
            try:
                metas.append(json.loads(meta.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                pass  # best effort: a killed process leaves none
        self._result = LoadResult(records, self.out_dir, rcs, time.monotonic() - self.t_start, self.cfg, self.logs,
                                  metas, lost)
        return self._result

    def _kill_all(self) -> None:
        for p in self.procs:
            if p.stdin is not None and not p.stdin.closed:
                try:
                    p.stdin.close()  # an ssh worker's end of the job: it stops when its session ends
                except OSError:
                    pass
            if p.poll() is None:
                p.kill()
                p.wait(5)

    def __enter__(self) -> LoadHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _sigint_default() -> None:
    # stop() ends a run with SIGINT: a harness started in the background of a non-interactive shell
    # (nohup ... &, CI) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def make_config(*, users: int | None = None, rate: float | None = None, shape: str | None = None,
                duration_s: float = 30.0, retry_policy: Any = None, **fields_: Any) -> LoadConfig:
    """A LoadConfig from run_load's keywords; `retry_policy` may be a RetryPolicy or a dict."""
    if retry_policy is not None and hasattr(retry_policy, "model_dump"):
        retry_policy = retry_policy.model_dump()
    chosen = shape or ("rate" if rate is not None else "users")
    cfg = LoadConfig(shape=chosen, duration_s=duration_s, retry=retry_policy,
                     **{k: v for k, v in fields_.items() if v is not None})
    if users is not None:
        cfg.users = users
    if rate is not None:
        cfg.rate_per_s = rate
    return cfg.validate()


def start_load(base_url: str, *, out_dir: str | Path, workers: int = 0, worker_host: str | None = None,
               worker_python: str | None = None, **kw: Any) -> LoadHandle:
    """Start a load run in the background; see make_config for the keywords."""
    if worker_host not in (None, "", "local") and workers <= 0:
        raise LoadError(f"worker host {worker_host}: distributed load needs workers >= 1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = make_config(**kw)
    cfg.out_dir = str(out.resolve())
    if workers > 0 and cfg.shape != "rate":
        # a worker without users sends nothing, and would never report a finite workload spent
        workers = min(workers, cfg.users)
    cfg.workers = max(1, workers)
    return LoadHandle(cfg, base_url.rstrip("/"), out, workers, worker_host, worker_python).start()


def env_load_kwargs(env: Any) -> dict[str, Any]:
    """start_load's keywords for an environment's load profile (its users or rate, mix, classes,
    retry policy, model and key, where the workers run); a caller's overrides go on top."""
    p, e = env.load, env
    kw: dict[str, Any] = dict(users=p.users, duration_s=p.duration_s, mix=dict(p.mix), classes=dict(p.classes),
                              model=e.endpoints.model, max_tokens=p.max_tokens, special_share=p.special_share,
                              stream=p.stream, retry_policy=e.retry,
                              api_key=e.endpoints.api_key, workers=p.workers, worker_host=p.worker_host,
                              worker_python=p.worker_python)
    if p.shape == "rate":
        kw.update(rate=p.rate_per_s, users=None)
    return kw


def start_env_load(env: Any, *, out_dir: str | Path, url: str | None = None, **overrides: Any) -> LoadHandle:
    """Start the environment's load profile against its client endpoint (or `url`), with `overrides`."""
    return start_load(url or env.endpoints.api, out_dir=out_dir, **{**env_load_kwargs(env), **overrides})


def run_load(base_url: str, *, out_dir: str | Path, workers: int = 0, **kw: Any) -> LoadResult:
    """Run load to the end (bounded: duration + grace, then killed) and return the merged records.

    Keywords: users | rate | shape (users, rate, ramp, step), duration_s, mix, model, max_tokens,
    retry_policy, seed, api, workload, workload_n, classes, timeout_s, stream, api_key, ...
    """
    return start_load(base_url, out_dir=out_dir, workers=workers, **kw).wait()
