"""Fixtures for the report tests: the Allure 3 CLI and Chromium, skipped or required (CHAOS_REQUIRE)."""
from __future__ import annotations

from pathlib import Path

import pytest

from chaos.pytest_plugin import require_component
from chaos.report.browser import find_chromium
from chaos.report.html import find_allure

DATA = Path(__file__).parent / "data"


def _need(component: str, found: object, hint: str) -> None:
    require_component(component, None if found else hint)


@pytest.fixture
def allure_cli() -> Path:
    cli = find_allure()
    _need("allure", cli, "no Allure 3 CLI (run scripts/report.sh once, or set CHAOS_ALLURE)")
    assert cli is not None
    return cli


@pytest.fixture
def chromium() -> str:
    exe = find_chromium()
    _need("chromium", exe, "no chromium binary (apt-get install chromium, or set CHAOS_CHROMIUM)")
    assert exe is not None
    return exe
