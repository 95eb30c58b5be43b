"""One family of checks: every name chaos.checks exports is defined there once, and nowhere else in
chaos/ (no second `p99_below` meaning something else), and the old names are gone."""
from __future__ import annotations

import ast
from pathlib import Path

import chaos
import chaos.checks

ROOT = Path(chaos.__file__).parent
GONE = {"p99_below", "p50_below", "percentile_below", "error_rate_below", "goodput_above", "all_of"}


def definitions(names: set[str], root: Path = ROOT) -> dict[str, list[str]]:
    """name -> every `file:line` under root where a def or class of that name stands, at any depth."""
    found: dict[str, list[str]] = {n: [] for n in names}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in names:
                found[node.name].append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return found


def test_every_exported_check_name_is_defined_once_and_only_in_chaos_checks():
    found = definitions(set(chaos.checks.__all__))
    twice = {n: where for n, where in found.items() if len(where) > 1}
    outside = {n: where for n, where in found.items() if any(not w.startswith("chaos/checks/") for w in where)}
    assert not twice and not outside, (twice, outside)


def test_the_old_names_are_gone():
    assert definitions(GONE) == {n: [] for n in GONE}
    assert not GONE & set(chaos.__all__)


def test_the_check_sees_a_second_definition_at_any_depth(tmp_path):
    pkg = tmp_path / "chaos"
    pkg.mkdir()
    (pkg / "a.py").write_text("def p99_below_s():\n    pass\n")
    (pkg / "b.py").write_text("class X:\n    def p99_below_s(self):\n        pass\n")
    assert definitions({"p99_below_s"}, pkg) == {"p99_below_s": ["chaos/a.py:1", "chaos/b.py:2"]}
