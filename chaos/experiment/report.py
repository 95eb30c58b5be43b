"""What a game day shows while it runs (LiveView) and leaves for the report (AllureResults), both
fed by the experiment runner's events."""
from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from chaos.experiment import events as ev

# runner status -> Allure status; ABORTED and STOPPED are "broken" with their word first, which the
# "Aborted experiments" and "Stopped experiments" categories (chaos/report/results_dir.py) match
ALLURE_STATUS = {"PASSED": "passed", "FAILED": "failed", "ABORTED": "broken", "STOPPED": "broken",
                 "REFUSED": "skipped", "ERROR": "broken", "NOT STARTED": "skipped"}


class AllureResults:
    """One Allure result per experiment, its phases as steps, written when it ends."""

    def __init__(self, results_dir: str | Path, plan: str, env: Any) -> None:
        self.dir = Path(results_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.plan, self.env = plan, env
        self.open: dict[str, dict[str, Any]] = {}
        from chaos.report.results_dir import write_categories, write_environment_properties

        write_categories(self.dir)
        write_environment_properties(self.dir, env)

    def __call__(self, e: ev.Event) -> None:
        ms = int(e.t * 1000)
        res = self.open.setdefault(e.experiment, {
            "uuid": str(uuid.uuid4()), "historyId": f"gameday:{self.plan}:{e.experiment}", "name": e.experiment,
            "fullName": f"gameday.{self.plan}.{e.experiment}", "stage": "finished", "start": ms, "steps": [],
            "labels": [{"name": "suite", "value": "gameday"}, {"name": "feature", "value": self.plan},
                       {"name": "epic", "value": "Game day"}, {"name": "environment", "value": self.env.name}],
            "description": ""})
        if isinstance(e, ev.ExperimentStarted):
            res["description"] = e.plan
        elif isinstance(e, ev.PhaseStarted):
            res["steps"].append({"name": e.phase, "status": "passed", "stage": "finished", "start": ms, "stop": ms,
                                 "steps": []})
        elif isinstance(e, ev.PhaseEnded) and res["steps"]:
            step = res["steps"][-1]
            step["stop"] = ms
            if not e.ok:
                step["status"], step["statusDetails"] = "broken", {"message": e.error or ""}
        elif isinstance(e, (ev.FaultInjected, ev.FaultReverted, ev.HypothesisChecked, ev.Aborted, ev.Stopped,
                            ev.VerdictReached)) and res["steps"]:
            ok = getattr(e, "ok", not isinstance(e, (ev.Aborted, ev.Stopped)))
            unproven = ok and bool(getattr(e, "unproven", ()))  # not proven is never green
            res["steps"][-1]["steps"].append({"name": ev.describe(e),
                                              "status": "skipped" if unproven else "passed" if ok else "failed",
                                              "stage": "finished", "start": ms, "stop": ms})
        elif isinstance(e, ev.ExperimentEnded):
            res.update(stop=ms, status=ALLURE_STATUS.get(e.status, "unknown"),
                       statusDetails={"message": f"{e.status}: {e.reason}" if e.reason else e.status})
            (self.dir / f"{res['uuid']}-result.json").write_text(json.dumps(res), encoding="utf-8")
            del self.open[e.experiment]


class LiveView:
    """Progress per experiment: phase, error rate, P99, abort margin. A rich Live table on a terminal;
    elsewhere (CI, a pipe) one line per phase and outcome."""

    def __init__(self, console: Any, names: list[str], abort_error_rate: float, *, live: bool = True) -> None:
        from rich.console import Console

        self.console = console or Console()
        self.rows: dict[str, dict[str, Any]] = {n: {"phase": "waiting", "error": None, "p99": None, "status": ""}
                                                for n in names}
        self.abort = abort_error_rate
        self.live = None
        if live and self.console.is_terminal:
            from rich.live import Live

            self.live = Live(self.table(), console=self.console, refresh_per_second=4, transient=False)

    def table(self) -> Any:
        from rich.table import Table

        t = Table(title="game day")
        for col in ("experiment", "phase", "error rate", "P99", "abort margin", "status"):
            t.add_column(col)
        for name, r in self.rows.items():
            err = r["error"]
            margin = "-" if err is None else f"{self.abort - err:+.1%}"
            t.add_row(name, r["phase"], "-" if err is None else f"{err:.1%}",
                      "-" if r["p99"] is None else f"{r['p99']:.2f} s", margin, r["status"])
        return t

    def __call__(self, e: ev.Event) -> None:
        row = self.rows.get(e.experiment)
        if row is None:
            return
        if isinstance(e, ev.PhaseStarted):
            row["phase"] = e.phase
            self._say(f"{e.experiment}: {e.phase}")
        elif isinstance(e, ev.Measured) and e.probe == "error rate":
            row["error"] = e.got
        elif isinstance(e, ev.Measured) and e.probe.startswith("e2e P99"):
            row["p99"] = e.got
        elif isinstance(e, ev.ExperimentEnded):
            row["phase"], row["status"] = "done", e.status
            self._say(f"{e.experiment}: {e.status}" + (f" ({e.reason})" if e.reason else ""))
        elif isinstance(e, (ev.Aborted, ev.Stopped, ev.FaultInjected, ev.FaultReverted)):
            self._say(f"{e.experiment}: {ev.describe(e)}")
        if self.live is not None:
            self.live.update(self.table())

    def _say(self, line: str) -> None:
        if self.live is None:
            self.console.print(line, highlight=False, soft_wrap=True)

    def __enter__(self) -> LiveView:
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()
