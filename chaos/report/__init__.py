"""Reporting: Allure phases and attachments, timeline plots, tables, the terminal summary, HTML build.

Names are imported lazily so that `chaos.report.summary` (used by the plugin) does not pull in
matplotlib or allure.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "phase": "allure", "labels": "allure", "title": "allure", "attach_png": "allure", "attach_text": "allure",
    "attach_table": "allure", "attach_json": "allure", "attach_log_tail": "allure", "register_secret": "redaction",
    "redact": "redaction",
    "write_environment_properties": "results_dir", "write_categories": "results_dir", "CATEGORIES": "results_dir",
    "plot_timeline": "timeline", "plot_breaker": "timeline",
    "Window": "series", "Marker": "series", "fault_windows": "series", "request_series": "series",
    "Table": "tables", "verdict_table": "tables", "latency_table": "tables",
    "SummaryCollector": "summary",
    "generate": "html", "find_allure": "html", "install_allure": "html", "ReportError": "html",
    "listed_tests": "browser", "screenshot": "browser", "find_chromium": "browser",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'chaos.report' has no attribute {name!r}")
    return getattr(importlib.import_module(f"chaos.report.{module}"), name)


def __dir__() -> list[str]:
    return __all__
