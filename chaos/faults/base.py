"""Fault: inject()/revert() with proof of effect, a durable ledger record, and safety rules."""
from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from chaos.errors import FaultError, FaultNotEffective, SafetyError
from chaos.faults import ledger as _ledger

Listener = Callable[[str, "Fault", dict[str, Any]], None]
listeners: list[Listener] = []  # called with ("inject"|"effective"|"revert", fault, info)
_act_lock = threading.RLock()


def recover_bound_s(slas: Any) -> float:
    """How long a revert waits for a crashed replica to answer again: twice the recovery SLA (what the
    recovery suite's wait allows, so a late return is a failed recovery verdict with its figure, not a
    revert error), and never less than a cold start. The cold-start SLA alone is too short: a TP 2
    replica killed under load on 2 cores can take just over it (241 s against 240) to serve, still
    inside recovery_s 300, and that is the recovery verdict's to judge."""
    bound: float = max(slas.cold_start_s, 2 * slas.recovery_s)
    return bound


@dataclass
class Policy:
    """Where faults are recorded and what they may do."""

    ledger: _ledger.Ledger | None = None
    protected: bool = False
    allow_destructive: bool = False
    dry_run: bool = False
    verify_timeout_s: float = 5.0
    # how long a revert waits for a killed or stopped replica to answer again (recover_bound_s)
    recover_timeout_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep

    @classmethod
    def for_env(cls, env: Any, **kw: Any) -> Policy:
        kw.setdefault("recover_timeout_s", recover_bound_s(env.slas))
        return cls(ledger=_ledger.Ledger(env.state_dir), protected=env.safety.protected, **kw)

    def get_ledger(self) -> _ledger.Ledger:
        return self.ledger or _ledger.Ledger(os.environ.get("CHAOS_STATE_DIR", ".state"))


_policy = Policy()


def configure(**kw: Any) -> Policy:
    """Set the process-wide default Policy fields (ledger, protected, allow_destructive, dry_run...)."""
    global _policy
    _policy = replace(_policy, **kw)
    return _policy


def current_policy() -> Policy:
    return _policy


@contextlib.contextmanager
def _critical() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP (main thread) and the act lock so a record and its action stay together."""
    main = threading.current_thread() is threading.main_thread()
    with _act_lock:
        if main:
            _ledger.enter_critical()
        old = signal.pthread_sigmask(signal.SIG_BLOCK, set(_ledger.HANDLED)) if main else None
        try:
            yield
        finally:
            if old is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)
            if main:
                _ledger.exit_critical()


class Fault:
    """One fault: subclasses fill in _preflight/_plan/_undo/_apply/_unapply/_check."""

    kind = "fault"
    destructive = False

    def __init__(self, *, seed: int | None = None, policy: Policy | None = None) -> None:
        self.seed = seed if seed is not None else random.SystemRandom().randrange(2**32)
        self.rng = random.Random(self.seed)
        self._policy = policy
        self.record_id: str | None = None
        self.injected = False
        self.times: dict[str, float] = {}
        self.evidence: dict[str, Any] = {}
        self.lapsed: FaultNotEffective | None = None

    # -- subclass hooks -------------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        return {}

    def _preflight(self) -> None:
        """Check the aim (target exists, API answers) before anything is recorded or done."""

    def _plan(self) -> list[str]:
        return [f"inject {self.kind} {self.params()}"]

    def _undo(self) -> list[dict[str, Any]]:
        return []

    def _apply(self) -> None:
        raise NotImplementedError

    def _unapply(self) -> None:
        raise NotImplementedError

    def _check(self) -> None:
        """Raise FaultNotEffective unless the fault is in effect right now."""

    # -- public API -----------------------------------------------------------------------
    @property
    def policy(self) -> Policy:
        return self._policy or _policy

    def using(self, policy: Policy | None = None, **kw: Any) -> Fault:
        """Use `policy` (default: the current one) with fields overridden, for this fault only; returns self."""
        self._policy = replace(policy or self.policy, **kw)
        return self

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "destructive": self.destructive, "seed": self.seed, "params": self.params(),
                "record_id": self.record_id, "times": dict(self.times), "evidence": dict(self.evidence)}

    def plan(self) -> dict[str, Any]:
        return {"dry_run": True, "kind": self.kind, "destructive": self.destructive, "seed": self.seed,
                "params": self.params(), "steps": self._plan(), "undo": self._undo_safe()}

    def _undo_safe(self) -> list[dict[str, Any]]:
        try:
            return self._undo()
        except Exception as e:
            return [{"kind": "unknown", "error": str(e)}]

    def check_safety(self) -> None:
        p = self.policy
        if self.destructive and p.protected and not p.allow_destructive:
            raise SafetyError(f"fault {self.kind} is destructive and the environment is protected "
                              "(pass allow_destructive / --allow-destructive to override)")

    def inject(self) -> dict[str, Any]:
        """Check safety and aim, record, act, then prove the effect (reverting if it is not there)."""
        if self.injected:
            raise FaultError("already injected", fault=self.kind)
        self.check_safety()
        if self.policy.dry_run:
            return self.plan()
        self._preflight()
        t0 = time.monotonic()
        with _critical():
            self.record_id = self.policy.get_ledger().record_inject(self.describe(), self._undo())
            _ledger.register_active(self)
            self.injected = True
            try:
                self._apply()
            except BaseException:
                self.revert(check=False, by="failed-inject")
                raise
        self._emit("inject", {})
        try:
            self.verify()
        except BaseException:
            self.revert(check=False, by="not-effective")
            raise
        self.times["inject_to_effect_s"] = time.monotonic() - t0
        self._emit("effective", {"elapsed_s": self.times["inject_to_effect_s"]})
        return self.describe()

    def verify(self, timeout: float | None = None) -> None:
        """Prove the fault is in effect, polling up to the policy's verify timeout."""
        p = self.policy
        deadline = p.clock() + (p.verify_timeout_s if timeout is None else timeout)
        while True:
            try:
                self._check()
                return
            except FaultNotEffective:
                if p.clock() >= deadline:
                    raise
            p.sleep(0.02)

    def revert(self, *, check: bool = True, by: str = "revert") -> None:
        """Undo the fault (idempotent). With check, first prove it was still in effect."""
        if not self.injected:
            return
        if check:
            try:
                self.verify(timeout=0.5)
            except FaultNotEffective as e:
                self.lapsed = e
        t0 = time.monotonic()
        with _critical():
            if not self.injected:
                return
            error = None
            try:
                self._unapply()
            except Exception as e:
                error = str(e)
                raise FaultError(f"revert failed: {e}", fault=self.kind) from e
            finally:
                self.injected = False
                _ledger.unregister_active(self)
                if self.record_id:
                    self.policy.get_ledger().record_done(self.record_id, by=by, error=error)
        self.times["revert_s"] = time.monotonic() - t0
        self._emit("revert", {"by": by})
        if check and self.lapsed is not None:
            raise FaultNotEffective(f"was no longer in effect before revert: {self.lapsed}", fault=self.kind)

    def _emit(self, event: str, info: dict[str, Any]) -> None:
        for fn in list(listeners):
            try:
                fn(event, self, info)
            except Exception:
                pass  # a broken observer must not break fault handling

    # -- composition ----------------------------------------------------------------------
    def __enter__(self) -> Fault:
        self.inject()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.revert(check=exc_type is None)

    def __and__(self, other: Fault) -> AllOf:
        return AllOf([self, other])

    def after(self, delay_s: float) -> Scheduled:
        return Scheduled(self, delay_s=delay_s)

    def lasting(self, duration_s: float) -> Scheduled:
        return Scheduled(self, delay_s=0.0, duration_s=duration_s)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.kind} {self.params()}>"


class AllOf(Fault):
    """Several faults at once: injected in order, reverted in reverse; all or nothing."""

    kind = "all"

    def __init__(self, faults: Sequence[Fault], **kw: Any) -> None:
        super().__init__(**kw)
        self.faults: list[Fault] = []
        for f in faults:
            self.faults.extend(f.faults if isinstance(f, AllOf) else [f])
        self.destructive = any(f.destructive for f in self.faults)

    def __and__(self, other: Fault) -> AllOf:
        return AllOf([*self.faults, other])

    def using(self, policy: Policy | None = None, **kw: Any) -> AllOf:
        for f in self.faults:
            f.using(policy, **kw)
        super().using(policy, **kw)
        return self

    def params(self) -> dict[str, Any]:
        return {"faults": [f.describe() for f in self.faults]}

    def plan(self) -> dict[str, Any]:
        return {"dry_run": True, "kind": self.kind, "destructive": self.destructive, "faults": [f.plan() for f in self.faults]}

    def check_safety(self) -> None:
        for f in self.faults:
            f.check_safety()

    def inject(self) -> dict[str, Any]:
        self.check_safety()
        if self.policy.dry_run:
            return self.plan()
        for f in self.faults:
            f._preflight()
        done: list[Fault] = []
        try:
            for f in self.faults:
                f.inject()
                done.append(f)
        except BaseException:
            for f in reversed(done):
                f.revert(check=False, by="failed-inject")
            raise
        self.injected = True
        return self.describe()

    def verify(self, timeout: float | None = None) -> None:
        for f in self.faults:
            f.verify(timeout)

    def revert(self, *, check: bool = True, by: str = "revert") -> None:
        errors: list[BaseException] = []
        for f in reversed(self.faults):
            try:
                f.revert(check=check, by=by)
            except Exception as e:
                errors.append(e)
        self.injected = False
        if errors:
            raise errors[0]


class Scheduled:
    """A fault injected after a delay and reverted after a duration, on a background thread."""

    def __init__(self, fault: Fault, *, delay_s: float = 0.0, duration_s: float | None = None) -> None:
        self.fault, self.delay_s, self.duration_s = fault, delay_s, duration_s
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def after(self, delay_s: float) -> Scheduled:
        self.delay_s = delay_s
        return self

    def lasting(self, duration_s: float) -> Scheduled:
        self.duration_s = duration_s
        return self

    def describe(self) -> dict[str, Any]:
        return {**self.fault.describe(), "after_s": self.delay_s, "lasting_s": self.duration_s}

    def run(self) -> None:
        """Blocking: wait, inject, hold, revert (always, even when cancelled or failing)."""
        try:
            if self._cancel.wait(self.delay_s):
                return
            self.fault.inject()
            if self.duration_s is not None:
                self._cancel.wait(self.duration_s)
            else:
                self._cancel.wait()
        except BaseException as e:
            self.error = e
        finally:
            try:
                self.fault.revert(check=self.error is None and not self._cancel.is_set())
            except BaseException as e:
                self.error = self.error or e

    def start(self) -> Scheduled:
        self._thread = threading.Thread(target=self.run, name=f"fault-{self.fault.kind}", daemon=True)
        self._thread.start()
        return self

    def cancel(self) -> None:
        self._cancel.set()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the schedule to finish; re-raises the fault's error."""
        if self._thread:
            self._thread.join(timeout)
        if self.error:
            raise self.error

    def __enter__(self) -> Scheduled:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.cancel()
        self.join()
