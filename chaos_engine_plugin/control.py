"""The control-directory protocol shared by the harness and the plugin (standard library only).

One directory per replica (LLM_CHAOS_ENGINE_FAULTS). An armed fault is a file `<id>.json` holding
`{"kind": ..., params}`; disarming is removing it, so an undo step is one idempotent `rm -f`. Each
process with the plugin writes `loaded.<pid>` when it registers, and `<id>.fired.<pid>` the first
time the fault acts there. Files are written as `<name>.tmp` and renamed, so a reader never sees half
a spec. Works the same for a local process, a container (`docker exec`) and one over SSH: the harness
only needs to run `sh -c` where the replica runs.
"""
from __future__ import annotations

import json
import os
import re
import time
import unicodedata
from typing import Any

ENV_VAR = "LLM_CHAOS_ENGINE_FAULTS"
REFRESH_S = 0.05  # how stale an arming may be; the cost of a disarmed hook is one clock read between refreshes

# kind -> {param: (type, default)}; `rank`: the TP rank that acts (None: every rank)
KINDS: dict[str, dict[str, tuple[type, Any]]] = {
    "step-error": {"rank": (int, None), "message": (str, "CUDA error: an illegal memory access was encountered\n"
                                                         "CUDA kernel errors might be asynchronously reported at some "
                                                         "other API call, so the stacktrace below might be incorrect.")},
    "allreduce-hang": {"rank": (int, 1), "max_s": (float, 3600.0)},
    "slow-step": {"rank": (int, None), "delay_s": (float, 0.5), "fraction": (float, 1.0)},
    "corrupt": {"fraction": (float, 0.02)},
    "tokenizer-crash": {"threshold": (int, 15)},
    # process: "engine" (EngineCore.add_request) or "api" (the API server's AsyncLLM.add_request: the
    # RSS vLLM's own /metrics reports as process_resident_memory_bytes, the one a gateway can read)
    "leak": {"bytes_per_request": (int, 4 << 20), "process": (str, "engine")},
    "kv-alloc-fail": {"fraction": (float, 1.0)},
    # the engine loop and /health live, prefill goes on (a new request gets its first token), no decode step
    "decode-stall": {},
}
LEAK_PROCESSES = ("engine", "api")
_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
UNSUPPORTED = "unsupported"  # a process that registered on a vLLM the plugin does not support
_VERSION_CHARS = re.compile(r"[^A-Za-z0-9.+_-]")


class SpecError(ValueError):
    """A fault spec the plugin cannot act on (unknown kind or parameter, wrong type)."""


def validate(fault_id: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with defaults filled in; SpecError naming the field otherwise."""
    if not _ID.match(fault_id):
        raise SpecError(f"fault id {fault_id!r}: expected 1-64 letters, digits, '-' or '_'")
    kind = spec.get("kind")
    if kind not in KINDS:
        raise SpecError(f"fault {fault_id}: kind {kind!r} is not one of {', '.join(KINDS)}")
    params = KINDS[kind]
    out: dict[str, Any] = {"kind": kind}
    for key, value in spec.items():
        if key == "kind":
            continue
        if key not in params:
            raise SpecError(f"fault {fault_id}: {kind} has no parameter {key!r} (expected {', '.join(params) or 'none'})")
        want = params[key][0]
        if value is not None and not (isinstance(value, want) or (want is float and isinstance(value, int))) \
                or isinstance(value, bool):
            raise SpecError(f"fault {fault_id}: {key} must be {want.__name__}, got {value!r}")
        out[key] = float(value) if want is float and isinstance(value, int) else value
    for key, (_, default) in params.items():
        out.setdefault(key, default)
    if kind == "leak" and out["process"] not in LEAK_PROCESSES:
        raise SpecError(f"fault {fault_id}: process must be one of {', '.join(LEAK_PROCESSES)}, got {out['process']!r}")
    if "fraction" in out and not 0.0 <= out["fraction"] <= 1.0:
        raise SpecError(f"fault {fault_id}: fraction must be within 0..1, got {out['fraction']}")
    return out


def write_command(directory: str, fault_id: str, spec: dict[str, Any]) -> list[str]:
    """The argv that arms `spec` as `fault_id` where the replica runs (atomic: tmp file, then rename)."""
    text = json.dumps(validate(fault_id, spec), sort_keys=True)
    path = os.path.join(directory, f"{fault_id}.json")
    return ["sh", "-c", 'mkdir -p "$1" && printf "%s" "$2" > "$3.tmp" && mv -f "$3.tmp" "$3"', "sh", directory, text, path]


def remove_command(directory: str, fault_id: str) -> list[str]:
    """The argv that disarms `fault_id` (idempotent)."""
    return ["rm", "-f", os.path.join(directory, f"{fault_id}.json")]


def list_command(directory: str) -> list[str]:
    """The argv that lists the directory, newest first (the latest registration decides: registered())."""
    return ["ls", "-1t", directory]


def registered(names: list[str]) -> tuple[str, str | None] | None:
    """What the newest registration in a listing (newest first) says: ("loaded", None), ("unsupported",
    its vLLM version), or None where no process registered."""
    for name in names:
        if name.startswith("loaded."):
            return "loaded", None
        if name.startswith(f"{UNSUPPORTED}."):
            _, _, rest = name.partition(".")
            _, _, version = rest.partition(".")
            return UNSUPPORTED, version or None
    return None


def selected(key: str, fraction: float) -> bool:
    """Whether `key` (a request id) is in the chosen fraction: stable across processes and restarts."""
    import zlib

    return zlib.crc32(key.encode()) % 10_000 < round(fraction * 10_000)


def is_emoji(ch: str) -> bool:
    cp = ord(ch)
    return 0x1F000 <= cp <= 0x1FAFF or 0x2600 <= cp <= 0x27BF


def crashes_tokenizer(text: str, threshold: int) -> bool:
    """The seed incident, as the simulator plays it: more than `threshold` emoji in text not in NFC form."""
    return sum(1 for ch in text if is_emoji(ch)) > threshold and not unicodedata.is_normalized("NFC", text)


class Control:
    """The armed faults of one control directory, as one process sees them (re-read when it changes)."""

    def __init__(self, directory: str, *, clock: Any = time.monotonic) -> None:
        self.directory = directory
        self._clock = clock
        self._next = 0.0
        self._mtime: int | None = None
        self.armed: dict[str, dict[str, Any]] = {}
        self._fired: set[str] = set()

    def mark_loaded(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        self._touch(f"loaded.{os.getpid()}")

    def mark_unsupported(self, version: str | None) -> None:
        """This process's vLLM is one the plugin does not support: `unsupported.<pid>.<version>`."""
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError:
            return  # evidence only: the replica runs on unpatched either way
        self._touch(f"{UNSUPPORTED}.{os.getpid()}.{_VERSION_CHARS.sub('_', version or 'unknown')[:64]}")

    def faults(self, kind: str) -> list[tuple[str, dict[str, Any]]]:
        """(id, spec) of the armed faults of `kind`; re-reads the directory at most every REFRESH_S."""
        now = self._clock()
        if now >= self._next:
            self._next = now + REFRESH_S
            self._refresh()
        if not self.armed:
            return []
        return [(i, s) for i, s in self.armed.items() if s["kind"] == kind]

    def _refresh(self) -> None:
        try:
            mtime = os.stat(self.directory).st_mtime_ns
        except OSError:
            self.armed, self._mtime = {}, None
            return
        if mtime == self._mtime:
            return
        self._mtime = mtime
        armed: dict[str, dict[str, Any]] = {}
        for name in os.listdir(self.directory):
            if not name.endswith(".json"):
                continue
            fault_id = name[:-5]
            try:
                with open(os.path.join(self.directory, name)) as f:
                    armed[fault_id] = validate(fault_id, json.load(f))
            except (OSError, ValueError):
                continue  # removed meanwhile, or not ours to act on
        self.armed = armed

    def fired(self, fault_id: str) -> bool:
        """Record that `fault_id` acted in this process; True the first time (the caller logs it then)."""
        if fault_id in self._fired:
            return False
        self._fired.add(fault_id)
        self._touch(f"{fault_id}.fired.{os.getpid()}")
        return True

    def _touch(self, name: str) -> None:
        try:
            with open(os.path.join(self.directory, name), "w") as f:
                f.write(f"{time.time():.3f}\n")
        except OSError:
            pass  # evidence only; the fault itself does not depend on it
