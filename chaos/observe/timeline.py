"""One timeline for everything observed during a run: samples and events on the wall clock."""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Sample:
    """A value seen at time t (epoch seconds) by an observer."""

    t: float
    source: str          # e.g. "health", "completion", "metrics", "gpu"
    name: str            # e.g. "status", "vllm:num_requests_running", "mem_used"
    value: Any
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class Event:
    """Something the harness did or saw happen: a phase, a fault, a state change."""

    t: float
    kind: str            # "phase", "fault_inject", "fault_revert", "state", ...
    name: str
    detail: dict[str, Any] = field(default_factory=dict)


class Timeline:
    """Thread-safe collector of samples and events; `clock` is injectable for tests."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.samples: list[Sample] = []
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def sample(self, source: str, name: str, value: Any, t: float | None = None, **labels: str) -> Sample:
        s = Sample(self.clock() if t is None else t, source, name, value, labels)
        with self._lock:
            self.samples.append(s)
        return s

    def event(self, kind: str, name: str, t: float | None = None, **detail: Any) -> Event:
        e = Event(self.clock() if t is None else t, kind, name, detail)
        with self._lock:
            self.events.append(e)
        return e

    def series(self, source: str, name: str) -> list[Sample]:
        with self._lock:
            return [s for s in self.samples if s.source == source and s.name == name]

    def find_events(self, kind: str | None = None, name: str | None = None) -> list[Event]:
        with self._lock:
            return [e for e in self.events if (kind is None or e.kind == kind) and (name is None or e.name == name)]

    def extend(self, samples: Iterable[Sample]) -> None:
        with self._lock:
            self.samples.extend(samples)

    def dump(self, path: str | Path) -> None:
        with self._lock:
            data = {"samples": [asdict(s) for s in self.samples], "events": [asdict(e) for e in self.events]}
        Path(path).write_text(json.dumps(data), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Timeline:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        tl = cls()
        tl.samples = [Sample(**s) for s in data.get("samples", [])]
        tl.events = [Event(**e) for e in data.get("events", [])]
        return tl
