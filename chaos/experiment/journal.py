"""The game day's journal: every event, measurement and verdict as `journal.json`, and a summary a
team can paste into its post-mortem (`summary.md`: hypothesis, what was done, what was observed,
what deviated)."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from chaos.experiment import events as ev


class Journal:
    """Subscribes to an EventBus; `write()` saves the journal and the summary (also mid-run)."""

    def __init__(self, out_dir: str | Path, *, title: str = "game day", meta: dict[str, Any] | None = None) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.title, self.meta = title, dict(meta or {})
        self.events: list[ev.Event] = []

    def __call__(self, event: ev.Event) -> None:
        self.events.append(event)
        if isinstance(event, (ev.ExperimentEnded, ev.Aborted, ev.Stopped, ev.FaultInjected, ev.FaultReverted)):
            self.write()  # what matters most is on disk even if this process dies next

    def experiments(self) -> list[str]:
        return list(dict.fromkeys(e.experiment for e in self.events))

    def write(self) -> Path:
        data = {"title": self.title, "written": time.time(), **self.meta,
                "events": [e.to_dict() for e in self.events]}
        path = self.out_dir / "journal.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
        tmp.replace(path)
        (self.out_dir / "summary.md").write_text(self.summary(), encoding="utf-8")
        return path

    def summary(self) -> str:
        out = [f"# {self.title}", ""]
        if self.meta:
            out += [", ".join(f"{k}: {v}" for k, v in self.meta.items()), ""]
        out += ["| experiment | status | why |", "|---|---|---|"]
        for name in self.experiments():
            end = self._last(name, ev.ExperimentEnded)
            out.append(f"| {name} | {end.status if end else 'RUNNING'} | {(end.reason if end else '') or '-'} |")
        for name in self.experiments():
            out += ["", f"## {name}", ""]
            mine = [e for e in self.events if e.experiment == name]
            t0 = mine[0].t
            started = self._last(name, ev.ExperimentStarted)
            if started is not None:
                out.append(f"**Hypothesis and method.** {started.plan}")
            out += ["", "**What was done and seen.**", ""]
            # in time order: an alert's firing is published when it is judged, but shown when it began
            for e in sorted(mine, key=lambda e: e.t):
                line = _line(e)
                if line:
                    out.append(f"- +{e.t - t0:6.1f} s  {line}")
                if isinstance(e, ev.VerdictReached) and e.name.startswith("monitoring"):
                    out += [f"    - {row}" for row in e.rows]  # every alert row, not only the failing ones
            deviations = [_line(e) for e in mine if _deviates(e)]
            out += ["", "**What deviated.** " + ("; ".join(d for d in deviations if d) if deviations else "nothing")]
        return "\n".join(out) + "\n"

    def _last(self, name: str, cls: type) -> Any:
        return next((e for e in reversed(self.events) if e.experiment == name and isinstance(e, cls)), None)


def _deviates(e: ev.Event) -> bool:
    return (isinstance(e, (ev.HypothesisChecked, ev.VerdictReached, ev.FaultReverted)) and not e.ok) or \
        (isinstance(e, ev.VerdictReached) and bool(e.unproven)) or isinstance(e, (ev.Aborted, ev.Stopped))


def _line(e: ev.Event) -> str | None:
    return None if isinstance(e, (ev.Measured, ev.ExperimentStarted)) else ev.describe(e)
