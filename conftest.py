"""Root conftest: loads every module in fixtures/ as a pytest plugin.

They are loaded from their files under private module names, so the PyPI package called
`fixtures` can neither shadow them nor be shadowed by them.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_FIXTURES = Path(__file__).parent / "fixtures"


def pytest_configure(config: pytest.Config) -> None:
    for path in sorted(_FIXTURES.glob("*.py")):
        if path.name.startswith("_"):
            continue
        name = f"llm_chaos_fixtures.{path.stem}"
        if config.pluginmanager.has_plugin(name):
            continue
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        config.pluginmanager.register(module, name)
