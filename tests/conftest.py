"""Shared set-up for the harness's own tests."""
from __future__ import annotations

from pathlib import Path

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
