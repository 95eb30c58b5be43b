"""The durable fault ledger: a record of how to undo each fault, fsynced before the fault acts.

Each line of <state_dir>/faults.jsonl is one JSON record:
  {"op": "inject", "id", "ts", "owner": {"pid", "start"}, "fault": {...}, "undo": [step, ...]}
  {"op": "done", "id", "ts", "by": "revert" | "cleanup" | "signal", "error": null | str}
Undo steps need nothing from the harness's memory (see chaos.faults._undo for the kinds).
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from chaos.shared import proc as _proc

LEDGER_FILE = "faults.jsonl"
PIDFILE_DIR = "targets"
_write_lock = threading.Lock()


def _owner() -> dict[str, Any]:
    return {"pid": os.getpid(), "start": _proc.start_time(os.getpid())}


class Ledger:
    """Append-only JSONL ledger of injected faults under a state directory."""

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.state_dir = Path(state_dir)
        self.path = self.state_dir / LEDGER_FILE

    def __repr__(self) -> str:
        return f"Ledger({str(self.state_dir)!r})"

    def _append(self, record: dict[str, Any]) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        line = (json.dumps(record, default=str, separators=(",", ":")) + "\n").encode()
        with _write_lock:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = b"\n" + line  # seal a torn line a crash left, so this record stays readable
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)

    def record_inject(self, fault: dict[str, Any], undo: list[dict[str, Any]]) -> str:
        """Write (and fsync) the intent to inject; returns the record id."""
        rid = uuid.uuid4().hex[:12]
        self._append({"op": "inject", "id": rid, "ts": time.time(), "owner": _owner(), "fault": fault, "undo": undo})
        return rid

    def record_done(self, rid: str, *, by: str = "revert", error: str | None = None) -> None:
        self._append({"op": "done", "id": rid, "ts": time.time(), "by": by, "error": error})

    def records(self) -> Iterator[dict[str, Any]]:
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                try:
                    yield json.loads(line)
                except ValueError:
                    continue  # a torn last line from a crash mid-write; the next one is intact

    def outstanding(self) -> list[dict[str, Any]]:
        """Inject records without a done record, oldest first."""
        pending: dict[Any, dict[str, Any]] = {}  # keyed by the records' JSON "id"
        for r in self.records():
            if r.get("op") == "inject":
                pending[r["id"]] = r
            elif r.get("op") == "done":
                pending.pop(r.get("id"), None)
        return list(pending.values())


def _owner_alive(owner: dict[str, Any]) -> bool:
    pid = owner.get("pid")
    if not pid or pid == os.getpid():
        return False
    return _proc.alive(int(pid), owner.get("start"))


def _state_dir_of(env_or_state_dir: Any) -> Path:
    return Path(getattr(env_or_state_dir, "state_dir", env_or_state_dir))


def cleanup(env_or_state_dir: Any, *, force: bool = False) -> list[str]:
    """Undo every outstanding fault and reap orphaned target processes; idempotent.

    Records owned by another live harness process are left alone unless force=True.
    With an Environment, also removes any `chaos-*` toxic left on its Toxiproxy and any `chaos-*`
    rule left on its fault proxies.
    """
    from chaos.faults import _undo

    state_dir = _state_dir_of(env_or_state_dir)
    ledger = Ledger(state_dir)
    done: list[str] = []
    for rec in reversed(ledger.outstanding()):
        if not force and _owner_alive(rec.get("owner", {})):
            continue
        errors = []
        for step in reversed(rec.get("undo", [])):
            try:
                done.append(_undo.run(step))
            except Exception as e:  # keep going: one stuck step must not block the others
                errors.append(f"{step.get('kind')}: {e}")
        ledger.record_done(rec["id"], by="cleanup", error="; ".join(errors) or None)
        done.extend(f"FAILED {e}" for e in errors)
    done.extend(_reap_pidfiles(state_dir, force=force))
    if not isinstance(env_or_state_dir, (str, os.PathLike)):
        done.extend(_reap_containers(env_or_state_dir, state_dir, force=force))
        done.extend(_undo.sweep_toxics(env_or_state_dir))
        from chaos.faults.proxy_admin import sweep_rules

        done.extend(sweep_rules(env_or_state_dir))
    return done


def _stack_owner_alive(state_dir: Path) -> bool:
    """True while the process that started the embedded stack in state_dir still runs."""
    try:
        info = json.loads((state_dir / "stack.json").read_text() or "{}")
    except (OSError, ValueError):
        return False
    return _owner_alive({"pid": info.get("owner"), "start": info.get("owner_start")})


def _reap_containers(env: Any, state_dir: Path, *, force: bool) -> list[str]:
    """Remove an embedded docker stack's containers (labelled with this state dir) once its owner is gone."""
    if getattr(env, "embedded", None) != "docker":
        return []  # never touch containers of a stack the harness did not start (staging, prod)
    hosts = {getattr(t, "docker_host", None) for t in getattr(env, "targets", []) if getattr(t, "kind", None) == "docker"}
    if not hosts or (not force and _stack_owner_alive(state_dir)):
        return []
    from chaos.errors import TargetError
    from chaos.targets.docker_client import LABEL_STATE, client_for

    out = []
    for host in sorted(hosts, key=str):
        try:
            client = client_for(host)
        except TargetError:
            continue  # no engine: nothing of ours can run there
        try:
            label = f"{LABEL_STATE}={state_dir.resolve()}"
            for c in client.containers.list(all=True, filters={"label": label}):
                c.remove(force=True)
                out.append(f"removed orphan container {c.name}")
        except Exception as e:  # keep going: the rest of cleanup must still run
            out.append(f"FAILED removing containers on {host or 'local engine'}: {e}")
        finally:
            client.close()
    return out


def _reap_pidfiles(state_dir: Path, *, force: bool) -> list[str]:
    out = []
    for pf in sorted((state_dir / PIDFILE_DIR).glob("*.pid")):
        try:
            info = json.loads(pf.read_text())
        except (OSError, ValueError):
            pf.unlink(missing_ok=True)
            continue
        if not force and _owner_alive(info.get("owner", {})):
            continue
        pid, start = int(info["pid"]), info.get("start")
        if _proc.alive(pid, start):
            _proc.kill_group(int(info.get("pgid", pid)))
            out.append(f"killed orphan {info.get('target', '?')} pid {pid} (group {info.get('pgid', pid)})")
        pf.unlink(missing_ok=True)
    return out


# ---- active faults and signal handling -------------------------------------------------------
_active: list[Any] = []
_active_lock = threading.RLock()


def register_active(fault: Any) -> None:
    with _active_lock:
        _active.append(fault)


def unregister_active(fault: Any) -> None:
    with _active_lock:
        if fault in _active:
            _active.remove(fault)


def active_faults() -> list[Any]:
    with _active_lock:
        return list(_active)


def revert_all(*, by: str = "signal") -> list[str]:
    """Revert every active fault of this process, newest first; never raises."""
    out = []
    for fault in reversed(active_faults()):
        try:
            fault.revert(check=False, by=by)
            out.append(f"reverted {fault.kind}")
        except Exception as e:
            print(f"chaos: could not revert {fault!r}: {e}", file=sys.stderr)
    return out


HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, a cancelled CI job, a closed terminal
_previous: dict[int, Any] = {}
_critical_depth = 0  # > 0 while the main thread records+acts; a signal then waits until it is done
_deferred: list[int] = []


def enter_critical() -> None:
    global _critical_depth
    _critical_depth += 1


def exit_critical() -> None:
    """Leave a critical section; run a signal that arrived meanwhile (it may raise)."""
    global _critical_depth
    _critical_depth -= 1
    if _critical_depth == 0 and _deferred:
        _handler(_deferred.pop(0), None)


def _handler(signum: int, frame: Any) -> None:
    # Python runs handlers in the main thread between bytecodes, even when the main thread has the
    # signal masked (another thread took it), so the mask alone cannot keep a record and its action together
    if _critical_depth > 0:
        _deferred.append(signum)
        return
    revert_all()
    prev = _previous.get(signum)
    if callable(prev) and prev is not signal.default_int_handler:
        prev(signum, frame)
        return
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


def install_signal_handlers() -> None:
    """On SIGINT/SIGTERM/SIGHUP: revert active faults, then chain to the old handler or exit (130 / 143 / 129)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in HANDLED:
        cur = signal.getsignal(sig)
        # SIGHUP ignored is nohup's explicit wish: it stays ignored. SIGINT ignored is only what a
        # non-interactive shell does to any background job, so a `kill -INT` still reverts and stops
        if cur is signal.SIG_IGN and sig == signal.SIGHUP:
            continue
        if cur is not _handler:
            _previous[sig] = cur
            signal.signal(sig, _handler)


def uninstall_signal_handlers() -> None:
    for sig, prev in list(_previous.items()):
        if signal.getsignal(sig) is _handler:
            signal.signal(sig, prev if prev is not None else signal.SIG_DFL)
        _previous.pop(sig, None)
