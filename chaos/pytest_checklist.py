"""pytest side of the release checklist (chaos.report.checklist): `proves` markers, each test's
outcome and the verdicts it asserted, the table at the top of the terminal summary and the Allure
report, and `--require-proven`, which fails the run (exit 1) when any item is not proven.

Loaded by chaos.pytest_plugin (its `pytest_plugins`); the option joins the plugin's "chaos" group
and resolves CLI -> $CHAOS_REQUIRE_PROVEN -> ini chaos_require_proven like its other settings.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from chaos.errors import ChaosError
from chaos.report import checklist as cl
from chaos.verify.verdict import Verdict, on_judged

STATE_KEY = pytest.StashKey["Checklist"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chaos", "llm-chaos resilience harness")
    group.addoption("--require-proven", dest="chaos_require_proven", action="store_true", default=None,
                    help="fail the run (exit 1) when any release-checklist item is not proven "
                         "(default: $CHAOS_REQUIRE_PROVEN, ini chaos_require_proven)")
    parser.addini("chaos_require_proven", "fail the run when any release-checklist item is not proven",
                  type="bool", default=False)
    parser.addini("chaos_checklist", "checklist items of your own suites, one 'item-id: what it proves' a line",
                  type="linelist", default=[])


def require_proven(config: pytest.Config) -> bool:
    from chaos.pytest_plugin import _setting

    return bool(_setting(config, "chaos_require_proven", "CHAOS_REQUIRE_PROVEN"))


def pytest_configure(config: pytest.Config) -> None:
    try:
        items = cl.parse_items(config.getini("chaos_checklist"))
    except ChaosError as e:
        raise pytest.UsageError(str(e)) from None
    plugin = Checklist(config, items)
    config.stash[STATE_KEY] = plugin
    config.pluginmanager.register(plugin, "llm-chaos-checklist")


def pytest_unconfigure(config: pytest.Config) -> None:
    if STATE_KEY in config.stash:
        config.stash[STATE_KEY].unhook()


def _short(nodeid: str) -> str:
    return nodeid.rpartition("/")[2]


def _reason(report: pytest.TestReport) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    if hasattr(report, "wasxfail"):
        return str(report.wasxfail)
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str((crash.message.splitlines() or [""])[0])
    return (report.longreprtext.strip().splitlines() or [""])[-1]


class Checklist:
    """The session's checklist: one ScenarioResult per test that proves any item, fed by its reports
    and by every verdict asserted while it runs."""

    def __init__(self, config: pytest.Config, items: tuple[cl.Item, ...]) -> None:
        self.config = config
        self.items = items
        self.results: dict[str, cl.ScenarioResult] = {}
        self.running: str | None = None
        self.unhook: Callable[[], None] = on_judged(self.heard)

    def heard(self, v: Verdict) -> None:
        r = self.results.get(self.running or "")
        if r is not None:
            r.verdicts.append(v)

    def statuses(self) -> list[cl.ItemStatus]:
        return cl.judge(self.items, self.results.values())

    def shown(self) -> bool:
        if self.config.option.collectonly:
            return False
        return bool(self.results) or require_proven(self.config)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        known = {i.id for i in self.items}
        for item in session.items:  # after -k, -m and deselection: what this run will try
            proves: dict[str, str] = {}
            for mark in item.iter_markers("proves"):
                for ident in mark.args:
                    if ident not in known:
                        raise pytest.UsageError(
                            f"{item.nodeid}: @pytest.mark.proves({ident!r}): unknown checklist item (known: "
                            f"{', '.join(sorted(known))}; add your own with the ini option chaos_checklist)")
                    proves.setdefault(ident, str(mark.kwargs.get("part", "")))
            if proves:
                self.results[item.nodeid] = cl.ScenarioResult(_short(item.nodeid), proves)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        self.running = item.nodeid
        try:
            yield
        finally:
            self.running = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        r = self.results.get(report.nodeid)
        if r is None:
            return
        xfail = hasattr(report, "wasxfail")
        if xfail and report.passed:  # xpassed: it was expected to fail, so its pass proves nothing
            r.record(report.when, "skipped", f"xpassed (marked xfail: {report.wasxfail})" if report.wasxfail
                     else "xpassed (marked xfail)")
            return
        r.record(report.when, report.outcome, "" if report.passed else _reason(report), xfail=xfail)

    @pytest.hookimpl(tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.shown():
            return
        statuses = self.statuses()
        terminalreporter.section("llm-chaos release checklist")
        for line in cl.render(statuses):
            terminalreporter.write_line(line)
        missing = cl.unproven_lines(statuses)
        if missing and require_proven(self.config):
            terminalreporter.write_line(f"--require-proven: {len(missing)} checklist item(s) not proven; "
                                        "the run fails:", red=True)
            for line in missing:
                terminalreporter.write_line(f"  {line}", red=True)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.shown():
            return
        statuses = self.statuses()
        results_dir = self.config.getoption("allure_report_dir", default=None)
        if results_dir:
            cl.write_allure_result(results_dir, statuses)
        if require_proven(self.config) and cl.unproven_lines(statuses) and session.exitstatus in (0, 5):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
