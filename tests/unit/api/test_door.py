"""The front door: at most 60 names in `chaos.__all__`, every public name `chaos` has and nothing private;
each name resolves; what a type checker sees (the TYPE_CHECKING block) is what runs; no name on the door
that only one suite uses (one suite's internals are imported from their module); each name documented.
`import chaos` staying as cheap as the errors is tests/integration/api/test_import_cost.py's."""
from __future__ import annotations

import ast
import importlib
import re
import types
from collections import defaultdict
from pathlib import Path

import chaos
from tests._support import REPO

MOST = 60


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
    assert len(chaos.__all__) <= MOST, f"{len(chaos.__all__)} names on the door; at most {MOST}"


def test_the_check_finds_an_unlisted_public_name_and_a_listed_private_one(tmp_path):
    src = tmp_path / "front.py"
    src.write_text("import os\nfrom typing import Any as _Any\n_x = 1\ny = 2\n__all__ = ['_x', 'z', 'z']\n")
    mod = types.ModuleType("front")
    exec(compile(src.read_text(), str(src), "exec"), mod.__dict__)
    mod.extra = 3  # set later, as a lazy import would
    assert offences(mod, src) == ["listed twice: z", "listed but private: _x", "listed but missing: z", "listed but missing: z",
                                  "public but unlisted: extra", "public but unlisted: os", "public but unlisted: y"]


def door_imports() -> dict[str, tuple[str, str]]:
    """name -> (module, attribute) of every import in chaos/__init__.py's TYPE_CHECKING block."""
    tree = ast.parse(Path(chaos.__file__).read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test))
    seen: dict[str, tuple[str, str]] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module
        for a in node.names:
            assert a.asname, f"{a.name}: re-export it as `{a.name} as {a.name}` (mypy --strict, ruff)"
            seen[a.asname] = (node.module, a.name)
    return seen


def test_what_a_type_checker_sees_is_what_runs():
    """The door's names are the errors and the TYPE_CHECKING block's imports, in that order, and each runs as
    the type checker sees it: the same object the import names, a module where it names a module."""
    seen = door_imports()
    errors = [n for n in chaos.__all__ if n not in seen]
    assert chaos.__all__ == [*errors, *seen]
    assert all(issubclass(getattr(chaos, n), chaos.ChaosError) for n in errors)
    for name, (module, attr) in seen.items():
        value = getattr(chaos, name)
        if isinstance(value, types.ModuleType):
            assert value.__name__ == f"{module}.{attr}", name
        else:
            assert value is getattr(importlib.import_module(module), attr), name


def door_users(root: Path = REPO) -> dict[str, set[str]]:
    """door name -> the suites (suites/X) and examples (examples/X) that use it: `from chaos import name` or
    `chaos.name`."""
    users: dict[str, set[str]] = defaultdict(set)
    for path in sorted([*(root / "suites").rglob("*.py"), *(root / "examples").rglob("*.py")]):
        unit = "/".join(path.relative_to(root).parts[:2])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "chaos" and not node.level:
                for a in node.names:
                    users[a.name].add(unit)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "chaos":
                users[node.attr].add(unit)
    return users


def test_no_door_name_serves_one_suite_alone():
    """A name on the door is for every suite and a team's own; what one suite alone uses is that suite's
    internals, imported from its module (chaos.verify.streams, chaos.verify.breaker, ...)."""
    users = door_users()
    alone = {n: sorted(users[n]) for n in chaos.__all__ if len(users.get(n, ())) == 1}
    assert alone == {}


def test_the_one_suite_rule_can_fail(tmp_path):
    (tmp_path / "suites" / "a").mkdir(parents=True)
    (tmp_path / "examples").mkdir()
    (tmp_path / "suites" / "a" / "test_a.py").write_text("import chaos\nfrom chaos import Verdict\nchaos.judge\n")
    assert door_users(tmp_path) == {"Verdict": {"suites/a"}, "judge": {"suites/a"}}


def test_the_front_door_documents_each_name():
    """docs/own-suites.md lists the front door by group; a name added to the door is added there too."""
    text = (REPO / "docs" / "own-suites.md").read_text(encoding="utf-8")
    missing = [n for n in chaos.__all__ if not re.search(rf"`{re.escape(n)}[`(.]", text)]  # `name`, `name(...)`, `name.x`
    assert missing == []
