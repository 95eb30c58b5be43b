"""The front door: `chaos.__all__` lists every public name `chaos` has and nothing private; each name
resolves; what a type checker sees (the TYPE_CHECKING block) is what runs (chaos/_front.py); and
`import chaos` stays as cheap as the errors (nothing behind the door is imported until used)."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
import types
from pathlib import Path

import chaos
from chaos._front import FRONT
from tests._support import REPO

ERRORS = ["ChaosError", "ConfigError", "FaultError", "FaultNotEffective", "LoadError", "SafetyError", "SLOViolation",
          "StackError", "TargetError"]


def offences(module: types.ModuleType, source: Path) -> list[str]:
    """Public names the module has but does not list, and listed names that are private or missing."""
    listed = list(getattr(module, "__all__", []))
    out = [f"listed twice: {n}" for n in sorted({n for n in listed if listed.count(n) > 1})]
    out += [f"listed but private: {n}" for n in listed if n.startswith("_") and not (n.startswith("__") and n.endswith("__"))]
    for n in listed:
        try:
            getattr(module, n)
        except AttributeError:
            out.append(f"listed but missing: {n}")
    # every public name bound at the top of the source (assignments, imports, defs) ...
    bound: set[str] = set()
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Assign):
            bound |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    # ... and every public attribute it has now, but its own submodules (bound by importing them)
    bound |= {n for n, v in vars(module).items() if n.isidentifier()  # not pytest's rewrite helpers (@py_builtins)
              and not (isinstance(v, types.ModuleType) and v.__name__.startswith(module.__name__ + "."))}
    out += [f"public but unlisted: {n}" for n in sorted(bound) if not n.startswith("_") and n not in listed]
    return out


def test_all_lists_exactly_the_public_names():
    for name in chaos.__all__:  # resolve every lazy name first: each is then an attribute too
        getattr(chaos, name)
    assert offences(chaos, Path(chaos.__file__)) == []
    assert chaos.__all__ == [*ERRORS, "__version__", *FRONT]


def test_the_check_finds_an_unlisted_public_name_and_a_listed_private_one(tmp_path):
    src = tmp_path / "front.py"
    src.write_text("import os\nfrom typing import Any as _Any\n_x = 1\ny = 2\n__all__ = ['_x', 'z', 'z']\n")
    mod = types.ModuleType("front")
    exec(compile(src.read_text(), str(src), "exec"), mod.__dict__)
    mod.extra = 3  # set later, as a lazy import would
    assert offences(mod, src) == ["listed twice: z", "listed but private: _x", "listed but missing: z", "listed but missing: z",
                                  "public but unlisted: extra", "public but unlisted: os", "public but unlisted: y"]


def test_what_a_type_checker_sees_is_what_runs():
    tree = ast.parse(Path(chaos.__file__).read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test))
    seen: dict[str, tuple[str, str | None]] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module
        for a in node.names:
            assert a.asname, f"{a.name}: re-export it as `{a.name} as {a.name}` (mypy --strict, ruff)"
            full = f"{node.module}.{a.name}"
            seen[a.asname] = (full, None) if full in {m for m, attr in FRONT.values() if attr is None} \
                else (node.module, a.name)
    assert seen == FRONT
    for name, (_module, attr) in FRONT.items():
        value = getattr(chaos, name)
        assert isinstance(value, types.ModuleType) if attr is None else not isinstance(value, types.ModuleType), name


def test_the_front_door_documents_each_name():
    """docs/own-suites.md lists the front door by group; a name added to FRONT is added there too."""
    text = (REPO / "docs" / "own-suites.md").read_text(encoding="utf-8")
    missing = [n for n in FRONT if not re.search(rf"`{re.escape(n)}[`(.]", text)]  # `name`, `name(...)`, `name.x`
    assert missing == []


def test_import_chaos_imports_nothing_behind_the_door():
    code = "import sys, chaos; print(sorted(m for m in sys.modules if m.startswith('chaos')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert out.strip() == "['chaos', 'chaos._front', 'chaos.errors']"
