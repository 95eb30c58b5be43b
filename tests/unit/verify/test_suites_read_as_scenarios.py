"""Suites read as scenario descriptions (load, fault, verdicts): no time.sleep polling, no access to
another object's private attributes, and no import but chaos's front door (`from chaos import ...` of
names in chaos.__all__), the harness's public modules (what one suite alone uses: `from chaos.verify.streams
import ...`), pytest and the standard library. Never the stand-ins, the bridge, the faces or a private
module: the waiting lives in the run handle (chaos/experiment/run.py), the verdicts in chaos/verify/, the
fixtures in the installed plugin (chaos/fixtures)."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import chaos
from tests._support import REPO


def _offences(path: Path, root: Path = REPO) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Attribute):
            if node.attr == "sleep" and isinstance(node.value, ast.Name) and node.value.id == "time":
                out.append(f"{path.relative_to(root)}:{node.lineno}: time.sleep")
            elif node.attr.startswith("_") and not node.attr.startswith("__") and not (
                    isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                out.append(f"{path.relative_to(root)}:{node.lineno}: private attribute .{node.attr}")
    return out


def test_no_suite_sleeps_to_poll_or_reaches_into_private_attributes():
    found = [o for p in sorted((REPO / "suites").rglob("*.py")) for o in _offences(p)]
    assert found == [], "\n".join(found)


def test_the_check_finds_what_it_forbids(tmp_path):
    bad = tmp_path / "test_bad.py"
    bad.write_text("import time\n\ndef t(sc):\n    time.sleep(1)\n    sc._observers.append(1)\n    self._ok = 1\n")
    assert _offences(bad, tmp_path) == ["test_bad.py:4: time.sleep", "test_bad.py:5: private attribute ._observers"]


# the stand-ins and their bridge (the wall), the faces (the CLI, the fixtures' module): never a suite's. The
# plugin's own helpers (chaos.pytest_plugin.hurt_params: a matrix parametrized by the targets each fault hurts) are.
NOT_FOR_SUITES = ("chaos.stack", "chaos.bridge", "chaos.commands", "chaos.cli", "chaos.fixtures")


def _import_offences(path: Path, root: Path = REPO) -> list[str]:
    """Imports of anything but the front door, the harness's public modules, pytest and the standard library."""
    def allowed(module: str) -> bool:
        if module.startswith("chaos."):
            return not any(p.startswith("_") for p in module.split(".")) and not any(
                module == f or module.startswith(f + ".") for f in NOT_FOR_SUITES)
        return module == "pytest" or module.split(".")[0] in sys.stdlib_module_names or module == "__future__"

    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            out += [f"{where}: import {a.name}" for a in node.names if a.name != "chaos" and not allowed(a.name)]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if module == "chaos":
                out += [f"{where}: chaos.{a.name} is not in chaos.__all__" for a in node.names
                        if a.name not in chaos.__all__]
            elif node.level or not allowed(module):
                out.append(f"{where}: from {module} import {', '.join(a.name for a in node.names)}")
    return out


def test_every_suite_imports_only_the_front_door_and_pytest():
    found = [o for p in sorted((REPO / "suites").rglob("*.py")) for o in _import_offences(p)]
    assert found == [], "\n".join(found)


def test_the_import_check_finds_what_it_forbids(tmp_path):
    bad = tmp_path / "test_bad.py"
    bad.write_text("import json, allure\nimport chaos.faults\nfrom chaos import Verdict, _DOOR\n"
                   "from chaos.verify.verdict import Verdict\nfrom suites.conftest import judge\nfrom . import x\n"
                   "from typing import Any\nimport pytest\nfrom chaos.faults._undo import replay\n"
                   "from chaos.fixtures.stack import StackHandle\n\ndef f():\n    from chaos.stack import launcher\n")
    assert _import_offences(bad, tmp_path) == [
        "test_bad.py:1: import allure", "test_bad.py:3: chaos._DOOR is not in chaos.__all__",
        "test_bad.py:5: from suites.conftest import judge", "test_bad.py:6: from . import x",
        "test_bad.py:9: from chaos.faults._undo import replay", "test_bad.py:10: from chaos.fixtures.stack import StackHandle",
        "test_bad.py:13: from chaos.stack import launcher"]


# a suite is a declaration of its experiment: the plumbing lives in chaos/ (test_breaker_tier and run_recovery
# call the breaker_tier and recovery_run factories). What is still longer (the steps= nested in it included):
LONGER = {"suites/streams/test_streams.py::test_stream_fault", "suites/streams/test_streams.py::steps"}
MAX_LINES = 40


def _long_functions(path: Path, root: Path = REPO) -> list[str]:
    """Functions of more than MAX_LINES lines (def to last line, decorators not counted)."""
    return [f"{path.relative_to(root)}::{n.name}" for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            and (n.end_lineno or n.lineno) - n.lineno + 1 > MAX_LINES]


def test_every_suite_function_is_a_declaration_of_at_most_40_lines():
    found = {o for p in sorted((REPO / "suites").rglob("*.py")) for o in _long_functions(p)}
    assert found - LONGER == set(), "longer than 40 lines: " + ", ".join(sorted(found - LONGER))
    assert LONGER - found == set(), "now short enough, drop from LONGER: " + ", ".join(sorted(LONGER - found))


def test_the_length_check_finds_a_long_function(tmp_path):
    long = tmp_path / "test_long.py"
    long.write_text("def short():\n    pass\n\n\ndef long():\n" + "    x = 1\n" * 40)
    assert _long_functions(long, tmp_path) == ["test_long.py::long"]
