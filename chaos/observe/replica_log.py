"""The replica side's request logs, read over HTTP from wherever the replicas run.

Each fault proxy serves its log at `GET /_chaos/log`, each simulator at `GET /admin/log` (same
token as their other admin calls, same pages: docs/faultproxy.md). A reader pages from a byte
cursor and keeps only the lines whose t_arrival falls in the window asked for; it remembers, for
each cursor it reached, the latest arrival before it, so a later window starts where no earlier line
can still belong to it instead of at byte 0. Nothing here reads a local file: a shared disk is never
assumed.
"""
from __future__ import annotations

import http.client
import json
import math
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chaos.errors import ChaosError, ConfigError
from chaos.observe._http import HttpGetter

if TYPE_CHECKING:  # the faults package uses observe at load time; observe needs TokenRef only as a type here
    from chaos.faults.tokens import TokenRef

PROXY_LOG_PATH = "/_chaos/log"
SIM_LOG_PATH = "/admin/log"


class ReplicaLogError(ChaosError):
    """A replica-side log could not be read: which proxy or simulator, and why, in one line."""


@dataclass(frozen=True)
class LogEndpoint:
    """Where one request log is served: "fault proxy" or "simulator", its name, base URL and token."""

    kind: str
    name: str
    url: str
    token: TokenRef
    path: str

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}"


class ReplicaLogReader:
    """Pages through one endpoint's log with a cursor; bounded in lines kept, page size and time."""

    def __init__(self, endpoint: LogEndpoint, *, page_lines: int = 5000, timeout_s: float = 5.0,
                 max_rows: int = 1_000_000, deadline_s: float = 120.0) -> None:
        self.endpoint = endpoint
        self.page_lines, self.max_rows, self.deadline_s = page_lines, max_rows, deadline_s
        self._http = HttpGetter(endpoint.url, timeout_s)
        # cursor -> the latest t_arrival (an upper bound) of any line before it; 0 -> none
        self._seen: dict[int, float] = {0: -math.inf}

    def start_for(self, since: float | None) -> int:
        """The furthest cursor before which no line arrived at or after `since`."""
        if since is None:
            return 0
        return max(c for c, latest in self._seen.items() if latest < since)

    def read(self, since: float | None = None, until: float | None = None) -> list[dict[str, Any]]:
        """The lines with since <= t_arrival <= until (a line without t_arrival is kept); ReplicaLogError."""
        cursor = self.start_for(since)
        latest = self._seen[cursor]
        rows: list[dict[str, Any]] = []
        t_end = time.monotonic() + self.deadline_s
        while True:
            page = self._page(cursor, since)
            for i, line in enumerate(page["lines"], 1):
                rec = self._parse(line, cursor, i)
                t = rec.get("t_arrival")
                if isinstance(t, (int, float)):
                    latest = max(latest, float(t))
                    if (since is not None and t < since) or (until is not None and t > until):
                        continue
                rows.append(rec)
            if len(rows) > self.max_rows:
                raise self._error(f"more than {self.max_rows} lines in the window {_window(since, until)}")
            if since is not None:
                latest = max(latest, since)  # what the server left out arrived before `since`
            cursor = int(page["next_cursor"])
            self._remember(cursor, latest)
            if not page["more"]:
                return rows
            if time.monotonic() > t_end:
                raise self._error(f"still reading at cursor {cursor} after {self.deadline_s:g} s")

    def _remember(self, cursor: int, latest: float) -> None:
        self._seen[cursor] = min(latest, self._seen.get(cursor, math.inf))
        if len(self._seen) > 4096:  # thin out: any subset of true bounds is still true
            keep = sorted(self._seen)[::2]
            self._seen = {c: self._seen[c] for c in keep}

    def _page(self, cursor: int, since: float | None) -> dict[str, Any]:
        ep = self.endpoint
        query = {"cursor": str(cursor), "limit": str(self.page_lines)}
        if since is not None:
            query["since"] = repr(since)
        try:
            headers = ep.token.header()
        except ConfigError as e:
            raise self._error(f"no token: {e}") from None
        target = f"{ep.path}?{urllib.parse.urlencode(query)}"
        try:
            try:
                status, _, body = self._http.request("GET", target, headers=headers)
            except (ConnectionError, http.client.HTTPException):  # a kept-alive connection the server closed
                status, _, body = self._http.request("GET", target, headers=headers)
        except (OSError, http.client.HTTPException) as e:
            raise self._error(f"not answering at {ep.url}: {type(e).__name__}: {e}") from None
        if status != 200:
            raise self._error(f"GET {ep.path} at cursor {cursor} -> {status} {_reason(body)}")
        try:
            page = json.loads(body)
            if not (isinstance(page, dict) and isinstance(page.get("lines"), list)
                    and isinstance(page.get("next_cursor"), int) and isinstance(page.get("more"), bool)):
                raise ValueError("expected {lines, next_cursor, more}")
        except ValueError as e:
            raise self._error(f"GET {ep.path} at cursor {cursor}: not a log page ({e}): {body[:120]!r}") from None
        if page["next_cursor"] < cursor or (page["more"] and page["next_cursor"] == cursor):
            raise self._error(f"GET {ep.path} at cursor {cursor}: the cursor did not move ({page['next_cursor']})")
        return page

    def _parse(self, line: Any, cursor: int, i: int) -> dict[str, Any]:
        try:
            rec = json.loads(line)
            if not isinstance(rec, dict):
                raise ValueError("expected a JSON object")
        except (TypeError, ValueError) as e:
            raise self._error(f"bad request-log line {i} of the page at cursor {cursor}: {e}: {str(line)[:80]!r}") \
                from None
        return rec

    def _error(self, why: str) -> ReplicaLogError:
        return ReplicaLogError(f"{self.endpoint.label}: {why}")

    def close(self) -> None:
        self._http.close()


@dataclass
class SourceRead:
    """What one source ("simulator" or "fault proxy") gave for a window: its rows, or why not."""

    source: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


class ReplicaLogs:
    """Every replica-side log an environment declares (its simulators, its fault proxies), each with its cursor."""

    def __init__(self, simulators: list[LogEndpoint], proxies: list[LogEndpoint], *,
                 not_simulators: list[str] | None = None, **reader_kw: Any) -> None:
        self.readers = {"simulator": [ReplicaLogReader(e, **reader_kw) for e in simulators],
                        "fault proxy": [ReplicaLogReader(e, **reader_kw) for e in proxies]}
        self.not_simulators = not_simulators or []

    @classmethod
    def for_env(cls, env: Any, **reader_kw: Any) -> ReplicaLogs:
        """The environment's simulator targets (admin API on their own port) and fault proxies."""
        from chaos.faults.proxy_admin import token_ref
        from chaos.faults.tokens import TokenRef, stack_token

        targets = list(getattr(env, "targets", []))
        sims = [t for t in targets if t.simulator is not None]
        sim_token = stack_token(env.state_dir) if sims else TokenRef()
        return cls([LogEndpoint("simulator", t.name, f"http://{t.host}:{t.port}", sim_token, SIM_LOG_PATH)
                    for t in sims],
                   [LogEndpoint("fault proxy", p.name, p.admin_url, token_ref(env, p), PROXY_LOG_PATH)
                    for p in getattr(env, "fault_proxies", [])],
                   not_simulators=[t.name for t in targets if t.simulator is None] if sims else [], **reader_kw)

    def has(self, source: str) -> bool:
        return bool(self.readers.get(source))

    def read(self, source: str, since: float | None = None, until: float | None = None) -> SourceRead | None:
        """Every log of `source` over the window; None where the environment has none of that source."""
        readers = self.readers.get(source)
        if not readers:
            return None
        got = SourceRead(source)
        if source == "simulator" and self.not_simulators:
            # a log of some replicas only would count what the others served as lost
            got.failures += [f"target {n} is not a simulator" for n in self.not_simulators]
            return got
        for r in readers:
            try:
                got.rows += r.read(since, until)
                got.origins.append(f"{r.endpoint.name} ({r.endpoint.url}{r.endpoint.path})")
            except ReplicaLogError as e:
                got.failures.append(str(e))
        return got

    def close(self) -> None:
        for rs in self.readers.values():
            for r in rs:
                r.close()


def records_window(records: Any, slack_s: float = 5.0) -> tuple[float | None, float | None]:
    """The window a replica log must cover for these client records: first send to last end, with slack
    for the replica's clock and its queue (None, None for no records)."""
    sends = [r.t_send for r in records]
    ends = [r.t_end for r in records]
    if not sends:
        return None, None
    return min(sends) - slack_s, max(ends) + slack_s


def _window(since: float | None, until: float | None) -> str:
    return f"[{'-' if since is None else f'{since:.3f}'}, {'-' if until is None else f'{until:.3f}'}]"


def _reason(raw: bytes) -> str:
    try:
        err = json.loads(raw).get("error")
        return err if isinstance(err, str) else json.dumps(err)[:200]
    except (ValueError, AttributeError):
        return raw.decode("utf-8", "replace").strip()[:200]
