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


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, with each ONE_PER_MACHINE folder scheduled as one file."""
    if config.getvalue("dist") != "loadfile":
        return None  # xdist's own scheduler
    from xdist.scheduler import LoadFileScheduling

    class OnePerMachineScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            folder = next((f for f in ONE_PER_MACHINE if nodeid.startswith(f)), None)
            return folder or str(super()._split_scope(nodeid))

    return OnePerMachineScheduling(config, log)
