"""Layers without cycles: every file of chaos/ sits in one layer (ground -> instruments -> judges -> experiment ->
faces), no file imports one that imports it back (directly or around a circle), and at most MAX_UPWARD imports run
from a lower layer up to a higher one, each with its reason in a comment (`# upward: why`) on its line or the line
above. Every import counts, those inside functions and TYPE_CHECKING blocks included: a cycle hidden in a function
body is still a cycle. A package __init__ that only hands names on (imports, `__all__`, a lazy `__getattr__`) is the
face of its package: the cycle check passes through it (importing `chaos.faults` leans on the modules it re-exports,
whose own imports are counted), the layer check places it in its package's layer."""
from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

from tests._support import REPO, strong_groups, write_tree

# Low to high. A module belongs to the longest entry it equals or sits under; "chaos" itself (the door) only by
# equality.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ground", ("chaos.errors", "chaos.shared", "chaos.env")),
    ("instruments", ("chaos.targets", "chaos.faults", "chaos.load", "chaos.observe", "chaos.resilience", "chaos.stack")),
    ("judges", ("chaos.verify", "chaos.checks", "chaos.report", "chaos.env_check")),
    ("experiment", ("chaos.experiment", "chaos.scenarios", "chaos.explore")),
    ("faces", ("chaos", "chaos.cli", "chaos.commands", "chaos.pytest_plugin", "chaos.fixtures",
               "chaos.bridge")),
)
MAX_UPWARD = 3
# The root of chaos/ holds the door, the CLI entry, the pytest plugin and the errors.
ROOT_FILES = {"__init__.py", "cli.py", "pytest_plugin.py", "errors.py"}
REASON = "upward"

Edge = tuple[str, int, str]  # (importing file, line, imported file), paths relative to the checkout


def module_name(rel: Path) -> str:
    parts = list(rel.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (length of the entry, layer)
    for rank, (_, entries) in enumerate(LAYERS):
        for e in entries:
            if module == e or (e != "chaos" and module.startswith(e + ".")):
                if best is None or len(e) > best[0]:
                    best = (len(e), rank)
    return None if best is None else best[1]


def _is_face(tree: ast.Module) -> bool:
    """An __init__ that only hands names on: imports, a docstring, private or `__all__` names, TYPE_CHECKING
    blocks, a lazy `__getattr__`/`__dir__`."""
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.If)):
            if isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
                return False
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if not all(isinstance(t, ast.Name) and t.id.startswith("_") for t in targets):
                return False
        elif not (isinstance(node, ast.FunctionDef) and node.name in ("__getattr__", "__dir__")):
            return False
    return True


def graph(root: Path = REPO) -> tuple[list[Edge], dict[str, str], set[str]]:
    """Every import between files of chaos/, each file's module name, and the package faces."""
    trees = {p.relative_to(root): ast.parse(p.read_text(encoding="utf-8"), str(p))
             for p in sorted((root / "chaos").rglob("*.py"))}
    file_of = {module_name(rel): str(rel) for rel in trees}
    faces = {str(rel) for rel, tree in trees.items() if rel.name == "__init__.py" and _is_face(tree)}

    def resolve(name: str) -> str | None:
        while name and name not in file_of:
            name = name.rpartition(".")[0]
        return file_of.get(name)

    edges: list[Edge] = []
    for rel, tree in trees.items():
        me = module_name(rel)
        package = me if rel.name == "__init__.py" else me.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([base] if base else [])])
                # `from a import b`: b is a module of a, or a name a defines; the package's own metadata
                # (`from chaos import __version__`) is read from the root every import already ran
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in file_of else base for a in node.names
                         if not (a.name.startswith("__") and a.name.endswith("__"))]
            else:
                continue
            for n in names:
                target = resolve(n) if n == "chaos" or n.startswith("chaos.") else None
                if target and target != str(rel):
                    edges.append((str(rel), node.lineno, target))
    return sorted(set(edges)), {f: m for m, f in file_of.items()}, faces


def cycles(edges: Iterable[Edge], faces: set[str]) -> list[list[Edge]]:
    """One circle of imports per strongly connected group of files (Tarjan), as the edges that close it. A face
    only hands names on: an import of it leans on the modules it re-exports, whose own edges are counted."""
    out_of: dict[str, list[Edge]] = {}
    for e in edges:
        if e[2] in faces:
            continue
        out_of.setdefault(e[0], []).append(e)
        out_of.setdefault(e[2], [])
    groups = strong_groups({v: {w for _, _, w in es} for v, es in out_of.items()})
    return [_circle(min(g), g, out_of) for g in groups]


def _circle(start: str, group: set[str], out_of: dict[str, list[Edge]]) -> list[Edge]:
    """The shortest way from `start` back to itself inside its group (breadth first)."""
    came: dict[str, Edge] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for e in out_of[v]:
                if e[2] in group and e[2] not in came:
                    came[e[2]] = e
                    nxt.append(e[2])
        if start in came:
            break
        frontier = nxt
    path, v = [], start
    while True:
        e = came[v]
        path.append(e)
        v = e[0]
        if v == start:
            return path[::-1]


def upward(edges: Iterable[Edge], modules: dict[str, str], root: Path = REPO) -> tuple[list[str], list[str]]:
    """Imports from a lower layer to a higher one, as 'path:line: from -> to (layer -> layer)'; and the files
    of chaos/ in no layer. An import of a package's face is an import of that package's layer."""
    lines_of: dict[str, list[str]] = {}
    found, unplaced = [], sorted(f for f, m in modules.items() if layer_of(m) is None)
    for a, line, b in edges:
        la, lb = layer_of(modules[a]), layer_of(modules[b])
        if la is None or lb is None or la >= lb:
            continue
        text = lines_of.setdefault(a, (root / a).read_text(encoding="utf-8").splitlines())
        here, above = text[line - 1], text[line - 2].strip() if line > 1 else ""
        reason = (REASON in here.partition("#")[2]) or (above.startswith("#") and REASON in above)
        found.append(f"{a}:{line}: {modules[a]} -> {modules[b]} ({LAYERS[la][0]} -> {LAYERS[lb][0]})"
                     + ("" if reason else " WITHOUT a '# upward: why' comment"))
    return found, unplaced


def _show(circle: list[Edge]) -> str:
    return "\n".join(f"  {a}:{line} imports {b}" for a, line, b in circle)


def test_no_file_imports_one_that_imports_it_back() -> None:
    edges, _, faces = graph()
    found = cycles(edges, faces)
    assert found == [], f"{len(found)} import cycles (move the shared piece down, or into its owner):\n" + \
        "\n".join(f"cycle {i + 1}:\n{_show(c)}" for i, c in enumerate(found))


def test_imports_run_down_the_layers() -> None:
    edges, modules, _ = graph()
    found, unplaced = upward(edges, modules)
    assert unplaced == [], "files in no layer (add their package to LAYERS):\n" + "\n".join(unplaced)
    bare = [f for f in found if f.endswith("comment")]
    assert bare == [], "upward imports need their reason on the line or the line above:\n" + "\n".join(bare)
    assert len(found) <= MAX_UPWARD, f"{len(found)} upward imports, at most {MAX_UPWARD}:\n" + "\n".join(found)


def test_the_root_holds_only_the_faces_and_the_errors() -> None:
    loose = sorted(p.name for p in (REPO / "chaos").glob("*.py") if p.name not in ROOT_FILES)
    assert loose == [], f"modules at the root of chaos/ (move each into the package it serves): {loose}"


def test_the_checks_find_what_they_forbid(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {
        "chaos/__init__.py": "from chaos.faults import x\n",
        "chaos/errors.py": "from chaos import __version__\nfrom chaos.faults import Fault\nimport chaos\n",
        "chaos/faults/__init__.py": "from chaos.faults.base import Fault\n__all__ = ['Fault']\n",
        "chaos/faults/base.py": "from chaos.env import model\n",
        "chaos/faults/ledger.py": "from chaos import faults\nfrom chaos.faults import base\n",
        "chaos/env/__init__.py": "X = 1\n",
        "chaos/env/model.py": "def f():\n    from ..faults.ledger import Ledger\n",
        "chaos/verify/a.py": "import chaos.report.b  # upward: ignored, the judges share a layer\n",
        "chaos/report/b.py": "from chaos.verify import a\n",
        "chaos/load/c.py": "# upward: the reason\nfrom chaos.verify.a import v\nfrom chaos.env import X\n",
        "chaos/nowhere.py": "",
    })
    edges, modules, faces = graph(root)
    assert faces == {"chaos/__init__.py", "chaos/faults/__init__.py"}
    assert [_show(c) for c in cycles(edges, faces)] == [
        "  chaos/env/model.py:2 imports chaos/faults/ledger.py\n  chaos/faults/ledger.py:2 imports chaos/faults/base.py\n"
        "  chaos/faults/base.py:1 imports chaos/env/model.py",
        "  chaos/report/b.py:1 imports chaos/verify/a.py\n  chaos/verify/a.py:1 imports chaos/report/b.py"]
    assert upward(edges, modules, root) == ([
        "chaos/env/model.py:2: chaos.env.model -> chaos.faults.ledger (ground -> instruments) WITHOUT a "
        "'# upward: why' comment",
        "chaos/errors.py:2: chaos.errors -> chaos.faults (ground -> instruments) WITHOUT a '# upward: why' comment",
        "chaos/errors.py:3: chaos.errors -> chaos (ground -> faces) WITHOUT a '# upward: why' comment",
        "chaos/load/c.py:2: chaos.load.c -> chaos.verify.a (instruments -> judges)"], ["chaos/nowhere.py"])
    assert ("chaos/load/c.py", 3, "chaos/env/__init__.py") in edges  # an __init__ with code of its own is a node
