"""The e2e lane's parallel pass (the Makefile's test-e2e, `--dist loadgroup` on two workers) in two fixed halves
of about equal minutes. With `--dist loadfile` xdist handed each worker a file at a time, biggest first, and the
pass took 438 s for 720 s of tests; measured on a fresh-clone CI run: gray release 231 s + the own suite 122 s
(its wheel build included) against the alert game days 203 s + the blind spot 83 s + the release suite 61 s +
the budget 20 s. A new file goes to the second half until it is measured."""
from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FIRST_HALF = frozenset({"test_gray_release.py", "test_own_suite.py"})


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups off the items
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE not in item.path.resolve().parents:
            continue  # a conftest's collection hook sees the whole session's items
        item.add_marker(pytest.mark.xdist_group("e2e-1" if item.path.name in FIRST_HALF else "e2e-2"))
