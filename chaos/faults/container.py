"""Faults on a whole replica (process tree or container): restart, kill, pause, stop."""
from __future__ import annotations

import signal
import time
from typing import Any

from chaos.errors import FaultError, FaultNotEffective, TargetError
from chaos.faults import _undo
from chaos.faults.base import Fault
from chaos.shared import proc as _proc
from chaos.targets.base import Target


class _TargetFault(Fault):
    """A fault aimed at one Target; checks the target exists and is running before acting."""

    def __init__(self, target: Target, *, recover_timeout_s: float | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.target = target
        self._recover_timeout_s = recover_timeout_s

    @property
    def recover_timeout_s(self) -> float:
        """Given, else the policy's (base.recover_bound_s of the environment's SLAs under the suites)."""
        return self._recover_timeout_s or self.policy.recover_timeout_s

    def params(self) -> dict[str, Any]:
        return {"target": self.target.name}

    def _preflight(self) -> None:
        try:
            running = self.target.is_running()
        except TargetError as e:
            raise FaultError(str(e), fault=self.kind) from None
        if not running:
            raise FaultError(f"target {self.target.name} is not running", fault=self.kind)

    def _not(self, why: str) -> FaultNotEffective:
        return FaultNotEffective(f"on target {self.target.name}: {why}", fault=self.kind)

    def _docker_undo(self, action: str) -> list[dict[str, Any]]:
        cid = getattr(self.target, "container_name", None)
        return [_undo.docker(cid, action, getattr(self.target, "docker_host", None))] if cid else []

    def _recover(self) -> None:
        """Make sure the target is back: started if nothing restarted it, then healthy."""
        deadline = time.monotonic() + min(5.0, self.recover_timeout_s)
        while not self.target.is_running() and time.monotonic() < deadline:
            self.policy.sleep(0.05)
        if not self.target.is_running():
            self.target.start()
        t0 = time.monotonic()
        self.target.wait_healthy(self.recover_timeout_s)
        self.times["revert_to_healthy_s"] = time.monotonic() - t0


class RestartFault(_TargetFault):
    """Restart the replica (a GPU driver reset), proven by its restart count rising.

    When the new process answers is the system's recovery, judged by the suite against
    slas.recovery_s from the moment of the restart, as for a crash: it used to be part of this
    proof, so a real vLLM that came back in 259 s (recovery_s 300, cold_start_s 240) under load was
    reported as "the fault really happened: FAILED" although it had happened."""

    kind, destructive = "restart", True

    def _apply(self) -> None:
        self._before = self.target.restart_count()
        self.target.restart()

    def _check(self) -> None:
        n = self.target.restart_count()
        if n <= self._before:
            raise self._not(f"restart count did not rise (still {n})")
        self.evidence["restart_count"] = n

    def inject(self) -> dict[str, Any]:
        old = self.policy.verify_timeout_s
        self.policy.verify_timeout_s = max(old, self.recover_timeout_s)  # a restart takes a cold start to prove
        try:
            return super().inject()
        finally:
            self.policy.verify_timeout_s = old

    def _undo(self) -> list[dict[str, Any]]:
        return self._docker_undo("start")

    def _unapply(self) -> None:
        if not self.target.is_running():
            self.target.start()


class KillFault(_TargetFault):
    """Send a signal (SIGKILL by default: a GPU crash) to the replica; proven by its old pid dying."""

    kind, destructive = "kill", True

    def __init__(self, target: Target, sig: int = signal.SIGKILL, **kw: Any) -> None:
        super().__init__(target, **kw)
        self.sig = signal.Signals(sig)

    def params(self) -> dict[str, Any]:
        return {"target": self.target.name, "signal": self.sig.name}

    def _apply(self) -> None:
        self._old = self.target.pid()
        self._old_start = _proc.start_time(self._old) if self._old and not getattr(self.target, "remote", False) else None
        self.target.kill(self.sig)

    def _check(self) -> None:
        if self._old is None:
            raise self._not("no process to kill")
        if getattr(self.target, "remote", False):
            gone = self.target.pid() != self._old
        else:
            gone = not _proc.alive(self._old, self._old_start)
        if not gone:
            raise self._not(f"pid {self._old} is still alive after {self.sig.name} (wrong process or signal ignored?)")
        self.evidence["killed_pid"] = self._old

    def _undo(self) -> list[dict[str, Any]]:
        return self._docker_undo("start")

    def _unapply(self) -> None:
        self._recover()


class PauseFault(_TargetFault):
    """Freeze the whole replica (cgroup freezer / SIGSTOP to the group); resume on revert."""

    kind = "pause"

    def _undo(self) -> list[dict[str, Any]]:
        cid = getattr(self.target, "container_name", None)
        if cid:
            return self._docker_undo("unpause")
        pid = self.target.pid()
        return [_undo.send_signal(pid, signal.SIGCONT, group=True, target=self.target.name)] if pid else []

    def _apply(self) -> None:
        self.target.pause()

    def _check(self) -> None:
        if not self.target.paused():
            raise self._not("not paused")

    def _unapply(self) -> None:
        if self.target.paused():
            self.target.resume()


class StopFault(_TargetFault):
    """Stop the replica; start it again on revert and wait until it is healthy."""

    kind, destructive = "stop", True

    def _undo(self) -> list[dict[str, Any]]:
        return self._docker_undo("start") or [{"kind": "none", "note": "process target: orphans reaped by pidfile"}]

    def _apply(self) -> None:
        self.target.stop()

    def _check(self) -> None:
        if self.target.is_running():
            raise self._not("still running")

    def _unapply(self) -> None:
        self.target.start()
        self._recover()


def restart(target: Target, **kw: Any) -> RestartFault:
    """Restart the target (a container restart stands in for a GPU driver reset)."""
    return RestartFault(target, **kw)


def kill(target: Target, sig: int = signal.SIGKILL, **kw: Any) -> KillFault:
    """Kill the target's process or container with `sig`; its restart policy must bring it back."""
    return KillFault(target, sig, **kw)


def pause(target: Target, **kw: Any) -> PauseFault:
    """Freeze the whole target (SIGSTOP or docker pause); the revert resumes it."""
    return PauseFault(target, **kw)


def stop(target: Target, **kw: Any) -> StopFault:
    """Stop the target cleanly; the revert starts it again."""
    return StopFault(target, **kw)
