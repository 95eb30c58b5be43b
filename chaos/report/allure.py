"""Allure helpers: phases as timed steps on the timeline, attachments, labels, results-dir files.

Every text attachment goes through `redact`, which blanks the secrets registered with
`register_secret` (and those of an Environment passed to `write_environment_properties`).
All of it is a no-op outside an Allure-enabled run, so library code may call it freely.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import json
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import allure
from allure_commons import plugin_manager
from allure_commons.model2 import Parameter

from chaos.observe.timeline import Event, Timeline
from chaos.report.redaction import redact, register_secret
from chaos.report.results_dir import env_secrets, write_categories, write_environment_properties
from chaos.report.tables import Table

__all__ = [
    "attach_json", "attach_log_tail", "attach_png", "attach_table", "attach_text", "env_secrets", "iso",
    "close_step", "labels", "open_step", "phase", "redact", "register_secret", "tail", "title", "write_categories",
    "write_environment_properties",
]


def iso(t: float) -> str:
    """Epoch seconds as an ISO-8601 UTC timestamp with milliseconds."""
    return _dt.datetime.fromtimestamp(t, _dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _step_params_add(uuid: str, name: str, value: str) -> None:
    # allure-pytest exposes no public way to add a parameter to a running step; reach its reporter,
    # and if that ever changes the step simply lacks its end parameter.
    for plugin in plugin_manager.get_plugins():
        logger = getattr(plugin, "allure_logger", None)
        get_item = getattr(logger, "get_item", None)
        if get_item is None:
            continue
        with contextlib.suppress(Exception):
            step = get_item(uuid)
            if step is not None:
                step.parameters.append(Parameter(name=name, value=value))


def open_step(title: str, start: float) -> Any:
    """Start an Allure step now (a phase heard as an event has no `with` block); close_step ends it."""
    step: Any = allure.step(title)
    step.params = {"start": f"{iso(start)} ({start:.3f})"}
    step.__enter__()
    step.start = start
    return step


def close_step(step: Any, end: float, status: str | None = None, error: str | None = None) -> None:
    """End a step from open_step: passed (status None), failed (a check did not hold) or broken."""
    _step_params_add(str(step.uuid), "end", f"{iso(end)} ({end:.3f}, {end - step.start:.2f} s)")
    exc: BaseException | None = None
    if status is not None:
        exc = AssertionError(error or status) if status == "failed" else RuntimeError(error or status)
    step.__exit__(type(exc) if exc else None, exc, None)


@contextlib.contextmanager
def phase(
    name: str,
    timeline: Timeline | None = None,
    *,
    t0: float | None = None,
    clock: Callable[[], float] | None = None,
    **detail: Any,
) -> Iterator[Event]:
    """An Allure step for a phase outside an experiment (a suite's own step, a verdict stage) that
    also records a `phase` Event on the timeline when given one; the event's detail gets end,
    duration_s and status. An experiment's phases reach Allure as events (chaos.experiment.subscribers)."""
    clock = clock or (timeline.clock if timeline is not None else time.time)
    start = clock()
    title = name if t0 is None else f"{name}  (t+{start - t0:.1f} s)"
    event = (timeline.event("phase", name, t=start, **detail) if timeline is not None
             else Event(start, "phase", name, dict(detail)))
    ctx = allure.step(title)
    ctx.params = {"start": f"{iso(start)} ({start:.3f})"}
    status = "passed"
    with ctx:
        try:
            yield event
        except BaseException as e:
            status = "failed" if isinstance(e, AssertionError) else "broken"
            raise
        finally:
            end = clock()
            event.detail.update(end=end, duration_s=end - start, status=status)
            _step_params_add(str(ctx.uuid), "end", f"{iso(end)} ({end:.3f}, {end - start:.2f} s)")


def labels(
    *, epic: str | None = None, feature: str | None = None, story: str | None = None,
    suite: str | None = None, severity: str | None = None, tags: Iterable[str] = (), **extra: str,
) -> None:
    """Set the Allure behaviour labels (epic / feature / story), suite, severity, tags and custom labels."""
    dynamic: Any = allure.dynamic  # allure-python's API is untyped
    if epic:
        dynamic.epic(epic)
    if feature:
        dynamic.feature(feature)
    if story:
        dynamic.story(story)
    if suite:
        dynamic.suite(suite)
    if severity:
        dynamic.severity(allure.severity_level(severity))
    tags = list(tags)
    if tags:
        dynamic.tag(*tags)
    for k, v in extra.items():
        dynamic.label(k, v)


def title(text: str, description: str | None = None) -> None:
    """A readable test title (and markdown description) in the report."""
    dynamic: Any = allure.dynamic  # allure-python's API is untyped
    dynamic.title(text)
    if description:
        dynamic.description(description)


def attach_png(data: bytes | str | Path, name: str = "timeline") -> None:
    """Attach a PNG from bytes or a file path."""
    if isinstance(data, (str, Path)):
        data = Path(data).read_bytes()
    allure.attach(data, name=name, attachment_type=allure.attachment_type.PNG)


def attach_text(text: str, name: str) -> None:
    allure.attach(redact(text), name=name, attachment_type=allure.attachment_type.TEXT)


def attach_table(table: Table, name: str | None = None) -> None:
    """Attach a table as HTML (rendered in the report) and as CSV (for spreadsheets)."""
    name = name or table.title
    allure.attach(redact(table.to_html()), name=name, attachment_type=allure.attachment_type.HTML)
    allure.attach(redact(table.to_csv()), name=f"{name} (csv)", attachment_type=allure.attachment_type.CSV)


def attach_json(obj: Any, name: str) -> None:
    """Attach any JSON-able object (unknown types via str), pretty-printed."""
    text = json.dumps(obj, indent=2, default=str, sort_keys=True)
    allure.attach(redact(text), name=name, attachment_type=allure.attachment_type.JSON)


def tail(source: str | Path | Iterable[str], lines: int = 200) -> str:
    """The last `lines` lines of a file path, a string, or an iterable of lines."""
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and Path(source).is_file()):
        with open(source, encoding="utf-8", errors="replace") as f:
            return "".join(deque(f, maxlen=lines))
    if isinstance(source, str):
        return "\n".join(source.splitlines()[-lines:])
    return "\n".join(str(x).rstrip("\n") for x in deque(source, maxlen=lines))


def attach_log_tail(source: str | Path | Iterable[str], name: str = "log tail", lines: int = 200) -> None:
    """Attach the last lines of a log (e.g. the hurt replica's), with secrets redacted."""
    attach_text(tail(source, lines), f"{name} (last {lines} lines)")
