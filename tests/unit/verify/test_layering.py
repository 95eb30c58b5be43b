"""The verdicts judge any stack: nothing in chaos/verify imports our own stand-ins (chaos/stack)."""
from __future__ import annotations

import ast
from pathlib import Path

VERIFY = Path(__file__).resolve().parents[3] / "chaos" / "verify"


def imported_modules(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_no_verdict_imports_the_embedded_stack() -> None:
    bad = {p.name: sorted(m for m in imported_modules(p) if m == "chaos.stack" or m.startswith("chaos.stack."))
           for p in sorted(VERIFY.glob("*.py"))}
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_check_sees_an_import_of_the_stack(tmp_path: Path) -> None:
    """Negative control: the import this test once had to catch (breaker.py's nearest_rank)."""
    p = tmp_path / "m.py"
    p.write_text("def f():\n    from chaos.stack.gateway.breaker import nearest_rank\n", encoding="utf-8")
    assert "chaos.stack.gateway.breaker" in imported_modules(p)
