"""Suites read as scenario descriptions (load, fault, verdicts): no time.sleep polling and no access to
another object's private attributes; the waiting lives in chaos/scenario.py, the verdicts in chaos/verify/."""
from __future__ import annotations

import ast
from pathlib import Path

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
