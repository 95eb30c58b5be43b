"""Shared set-up for the harness's own tests."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

TESTS_TIMEOUT_S = 600.0  # each of the harness's own tests; suites get theirs from their environment
_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test under tests/ without its own timeout marker gets TESTS_TIMEOUT_S, unless --timeout
    was given (a pytest-timeout marker outranks the command line)."""
    if not config.pluginmanager.hasplugin("timeout") or config.getoption("timeout", None) is not None:
        return
    for item in items:
        if _HERE in item.path.parents and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(TESTS_TIMEOUT_S))


# Folders whose tests share something there is one of per machine: under `--dist loadfile` their files
# go to one xdist worker together, in one work unit (the lab's hosts are network namespaces with fixed
# names, brought up once per session by tests/standins/lab/conftest.py). xdist's own `loadgroup` marks
# do nothing under pytest 9 (xdist 3.8 renames item._nodeid, which pytest 9 no longer reads).
ONE_PER_MACHINE = ("tests/standins/lab/",)

# Work units that take minutes: a test id (a parametrized one runs apart from its siblings), a file or a
# ONE_PER_MACHINE folder, with its seconds in the fresh-clone run of 1fe22ac (two workers). They are handed
# out first, longest first: xdist hands out files in order of their test count, and so began the 446 s
# file of the third-party breaker verdicts (3 tests) late, its two gateways one after the other on one
# worker while the other worker ran out of work.
LONG_UNITS = {
    "tests/standins/thirdparty/test_breaker_verdicts.py::test_the_verdict_table_reports_what_the_gateway_does[haproxy]": 260,
    "tests/standins/thirdparty/test_breaker_verdicts.py::test_the_verdict_table_reports_what_the_gateway_does[nginx]": 187,
    "tests/standins/gateway/test_breaker_suite_policy.py": 115,  # 172 with its below-degrade scenario
    "tests/standins/lab/": 140,
    # the end-to-end lane's longest files (one process, 2026-12-04): started first, so that neither worker
    # is left with one of them at the end
    "tests/e2e/experiment/test_gray_release.py": 217,
    "tests/e2e/monitoring/test_gameday_alerts.py": 187,
    "tests/e2e/load/test_load_verdicts_on_stack.py": 99,
}


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, with each ONE_PER_MACHINE folder scheduled as one file and LONG_UNITS first."""
    if config.getvalue("dist") != "loadfile":
        return None  # xdist's own scheduler
    from collections import OrderedDict

    from xdist.scheduler import LoadFileScheduling

    class LongFirstScheduling(LoadFileScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            if nodeid in LONG_UNITS:
                return nodeid
            folder = next((f for f in ONE_PER_MACHINE if nodeid.startswith(f)), None)
            return folder or str(super()._split_scope(nodeid))

        def _assign_work_unit(self, node: Any) -> None:
            if not self.ordered:  # the work queue is complete before the first unit is handed out
                self.ordered = True
                units = sorted(self.workqueue.items(), key=lambda unit: -LONG_UNITS.get(unit[0], 0))
                self.workqueue = OrderedDict(units)
            super()._assign_work_unit(node)

    return LongFirstScheduling(config, log)
