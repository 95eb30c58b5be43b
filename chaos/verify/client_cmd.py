"""A client command run once for the streams suite: its time limit, derived from the environment, and
what it was doing when it overran it, read from the replica side's log.

The limit is what one fault-free run of the same command measured (its start-up plus the same
request, answered by the same engine in the steady state), with headroom for a busy machine, plus
the retry policy's deadline (a client may retry for that long). A fixed limit is wrong both ways:
three vLLM replicas on 2 cores make a Python client's start alone take seconds, and a fast machine
would wait needlessly for a client that hangs.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chaos.shared.cpu_watch import CpuUse, CpuWatch
from chaos.shared.proc import communicate_until

STREAM_ENV = "CHAOS_STREAM"  # set to 1 for a client command: stream, print the text shown, exit 0 iff whole
HEADROOM = 2.0  # the steady run is one sample on a machine whose load moves: the limit allows twice it


@dataclass(frozen=True)
class ClientLimit:
    """How long a client command may run in a case, and what that was made of."""

    seconds: float
    why: str

    @classmethod
    def derive(cls, *, steady_run_s: float, deadline_s: float, engine_e2e_s: float | None = None,
               fault_extra_s: float = 0.0) -> ClientLimit:
        """From the command's fault-free run (start + request), the retry deadline and what the fault adds."""
        start = f", of which the engine's answer {engine_e2e_s:.1f} s" if engine_e2e_s is not None else ""
        extra = f" + {fault_extra_s:g} s the fault adds" if fault_extra_s else ""
        secs = HEADROOM * steady_run_s + deadline_s + fault_extra_s
        return cls(secs, f"{HEADROOM:g} x its fault-free run {steady_run_s:.1f} s{start} + retry deadline "
                         f"{deadline_s:g} s{extra}")


@dataclass
class CommandRun:
    """One run: what it printed, whether it exited 0, its last stderr line, and whether it overran."""

    shown: str
    ok: bool
    error: str | None
    t0: float
    t1: float
    timed_out: bool = False
    cpu: CpuUse | None = None  # its CPU time and run-queue wait (None: this kernel keeps no schedstat)


def run_command(template: str, base_url: str, *, timeout_s: float) -> CommandRun:
    """Run with CHAOS_STREAM=1, watched for CPU; on overrun, or once the host plainly starves it (no
    wait on a client that cannot run), the whole process group is killed (the shell's children too)."""
    cmd = template.replace("{base_url}", shlex.quote(base_url))
    t0 = time.time()
    p = subprocess.Popen(["/bin/sh", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, STREAM_ENV: "1"}, start_new_session=True)
    starved: list[CpuUse] = []
    with CpuWatch(on_starved=lambda _pid, use: starved.append(use)) as watch:
        watch.watch(p.pid)
        out, err, exited = communicate_until(p, timeout_s, lambda: bool(starved),
                                             before_kill=lambda: watch.done(p.pid))  # its last figures
        use = watch.done(p.pid)
    if not exited:
        why = use.why() if starved and use is not None else f"no exit within {timeout_s:.1f} s"
        return CommandRun(_strip(out or ""), False, why, t0, time.time(), not starved, use)
    ok = p.returncode == 0
    last = (err.strip().splitlines() or [""])[-1][:200]
    return CommandRun(_strip(out), ok, None if ok else last, t0, time.time(), cpu=use)


def _strip(out: str) -> str:
    return out[:-1] if out.endswith("\n") else out  # the one newline a print() adds is not part of the answer


def what_it_did(shown: str, t0: float, t1: float, lines: Sequence[dict[str, Any]]) -> str:
    """A timed-out client, told from its output and the replicas' log: no output, partial, retrying..."""
    out = f"partial output {shown[-40:]!r}" if shown else "no output"
    if not lines:
        return f"{out}; no request of it reached the replicas in {t1 - t0:.1f} s (it never sent: a start-up " \
               "that slow, or a hang before its first request)"
    last = lines[-1]
    at = float(last.get("t_arrival") or t0) - t0
    n = len(lines)
    tries = f"retrying: {n} attempts, the last" if n > 1 else "its one request"
    served = last.get("t_finish")
    if served is None:
        return f"{out}; {tries} arrived at +{at:.1f} s and the replica had not finished it at the limit"
    return (f"{out}; {tries} arrived at +{at:.1f} s, was answered by +{float(served) - t0:.1f} s "
            f"({last.get('outcome')}, {last.get('output_tokens')} tokens), and the client then did not exit "
            f"for {t1 - float(served):.1f} s")
