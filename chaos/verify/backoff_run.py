"""Run any client against the Recorder and judge its backoff: a Python callable or a shell command.

The three phases run at once on separate recorder slots (so a check takes as long as the slowest):
  retry          N copies, the first K attempts of each logical request fail in the chosen way
  give_up        one copy, every attempt fails: it must stop within max_attempts and the deadline
  non_retryable  one copy, every attempt gets a 400: it must not retry
With the retry phase, as many fixed-wait copies of the harness's own (chaos.verify.backoff_noise) run
too, on slots q0, q1, ...: their spread is the scheduler noise the jitter rule must see the clients' spread exceed.
A callable gets the base URL of its slot and makes one logical request. A command template gets
`{base_url}` replaced by that URL and runs under /bin/sh in its own process group.

Each client copy is watched for CPU (chaos.shared.cpu_watch): a copy the host starved (it waited
for a CPU far longer than it ran) makes the verdict "not proven: the host starved the client", never
a pass or a FAIL, and a starved command is stopped once that is plain rather than waited on.
"""
from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from chaos.env.model import RetryPolicy
from chaos.errors import ConfigError
from chaos.shared.cpu_watch import CpuUse, CpuWatch
from chaos.shared.proc import communicate_until
from chaos.verify import backoff_noise as noise
from chaos.verify.backoff import ClientRun, judge
from chaos.verify.recorder import RETRYABLE_FAILURES, Arrival, Recorder
from chaos.verify.starved import starved_verdict
from chaos.verify.verdict import Verdict

ClientFn = Callable[[str], Any]
PHASES = ("retry", "give_up", "non_retryable")
_PREFIX = {"retry": "r", "give_up": "g", "non_retryable": "n"}


def check_backoff(client: ClientFn | str, policy: RetryPolicy, *, failure: str = "503", fail_first: int = 3,
                  retry_after: float | None = None, clients: int = 4, time_limit_s: float | None = None,
                  phases: Sequence[str] = PHASES, model: str = "sim-model", **judge_kw: Any) -> Verdict:
    """Start a recorder, run the client in every phase, and return the verdict (rows per rule)."""
    if failure not in RETRYABLE_FAILURES:
        raise ConfigError(f"--failure: expected one of {', '.join(RETRYABLE_FAILURES)}, got {failure!r}")
    if clients < 1:
        raise ConfigError(f"--clients: expected at least 1, got {clients}")
    if isinstance(client, str) and "{base_url}" not in client:
        raise ConfigError("--client-cmd: the command template must contain {base_url}")
    unknown = set(phases) - set(PHASES)
    if unknown:
        raise ConfigError(f"phases: unknown {sorted(unknown)}; known: {', '.join(PHASES)}")
    limit = time_limit_s if time_limit_s is not None else policy.deadline_s + 5.0
    with Recorder(failure, fail_first, retry_after=retry_after, hold_s=limit + 5.0, model=model) as rec:
        slots: list[str] = []
        if "retry" in phases:
            slots += [f"r{i}" for i in range(clients)]
        if "give_up" in phases:
            rec.configure(failure, None, retry_after=retry_after, slot="g0")
            slots.append("g0")
        if "non_retryable" in phases:
            rec.configure("400", None, slot="n0")
            slots.append("n0")
        probe = None
        if "retry" in phases:  # the jitter rule needs the noise of this machine, now, to judge spread against
            copies = max(clients, noise.MIN_COPIES)
            for i in range(copies):
                rec.configure("503", fail_first, slot=f"{noise.PREFIX}{i}")
            probe = noise.NoiseProbe(rec, policy.min_interval_s, copies, processes=isinstance(client, str)).start()
        cpu: dict[str, CpuUse | None] = {}
        try:
            runs = _run_all(client, rec, slots, limit, probe.halt if probe is not None else _nothing, cpu)
        finally:
            if probe is not None:
                probe.stop()
        arrivals = [a for a in rec.arrivals() if a.action not in ("health", "models")]
    grouped: dict[str, Sequence[Arrival]] = {p: [a for a in arrivals if a.slot.startswith(_PREFIX[p])] for p in phases}
    grouped["noise"] = [a for a in arrivals if a.slot.startswith(noise.PREFIX)]
    v = judge(grouped, policy, runs=runs, **judge_kw)
    starved_verdict(v, cpu)
    v.data["scenario"] = {"failure": failure, "fail_first": fail_first, "retry_after": retry_after,
                          "clients": clients, "client": client if isinstance(client, str) else repr(client)}
    return v


def _nothing() -> None:
    pass


def _run_all(client: ClientFn | str, rec: Recorder, slots: list[str], limit: float,
             retry_over: Callable[[], None], cpu: dict[str, CpuUse | None]) -> list[ClientRun]:
    """Run every slot; retry_over() is called once every retry-phase copy ("r" slots) has finished.
    cpu gets each slot's CPU use (None where this kernel keeps no schedstat)."""
    if isinstance(client, str):
        return _run_commands(client, rec, slots, limit, retry_over, cpu)
    return _run_callables(client, rec, slots, limit, retry_over, cpu)


def _run_callables(fn: ClientFn, rec: Recorder, slots: list[str], limit: float,
                   retry_over: Callable[[], None], cpu: dict[str, CpuUse | None]) -> list[ClientRun]:
    done: dict[str, tuple[float, str]] = {}
    t0 = time.perf_counter()
    watch = CpuWatch.of_threads()
    tids: dict[str, int] = {}

    def body(slot: str) -> None:
        tids[slot] = threading.get_native_id()
        watch.watch(tids[slot])
        out = ""
        try:
            fn(rec.slot_url(slot))
        except Exception as e:  # a client may give up by raising; that is its business
            out = f"{type(e).__name__}: {e}"[:300]
        done[slot] = (time.perf_counter() - t0, out)
        watch.done(tids[slot])
        if all(s in done for s in slots if s.startswith(_PREFIX["retry"])):
            retry_over()

    threads = [threading.Thread(target=body, args=(s,), name=f"backoff-client-{s}", daemon=True) for s in slots]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, limit - (time.perf_counter() - t0)))
    end = time.perf_counter() - t0
    retry_over()
    watch.stop()
    cpu.update({s: watch.use(tids[s]) for s in slots if s in tids})
    return [ClientRun(s, s in done, done.get(s, (end, ""))[0], None, done.get(s, (0, ""))[1]) for s in slots]


def _run_commands(template: str, rec: Recorder, slots: list[str], limit: float,
                  retry_over: Callable[[], None], cpu: dict[str, CpuUse | None]) -> list[ClientRun]:
    t0 = time.perf_counter()
    procs: dict[str, subprocess.Popen[bytes]] = {}
    starved = threading.Event()
    with CpuWatch(on_starved=lambda _pid, _use: starved.set()) as watch:
        for s in slots:
            cmd = template.replace("{base_url}", rec.slot_url(s))
            procs[s] = subprocess.Popen(["/bin/sh", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
            watch.watch(procs[s].pid)
        runs: list[ClientRun] = []
        for s, p in procs.items():  # the "r" slots come first
            if not s.startswith(_PREFIX["retry"]):
                retry_over()
            # no wait to the limit on a client that cannot run: the verdict is not proven whatever it did
            out, _, exited = communicate_until(p, t0 + limit - time.perf_counter(), starved.is_set,
                                               before_kill=partial(watch.done, p.pid))  # its last figures
            runs.append(ClientRun(s, exited, time.perf_counter() - t0, p.returncode, _tail(out)))
            cpu[s] = watch.done(p.pid)
    retry_over()
    return runs


def _tail(out: bytes | None) -> str:
    return (out or b"")[-400:].decode("utf-8", "replace").strip()
