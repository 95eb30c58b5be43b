"""One wall, one bridge: the stand-ins (chaos/stack: simulator, reference gateway, third-party renderers, lab,
the Toxiproxy and fault-proxy servers) import only the shared ground and themselves; the harness (the rest of
chaos/, and suites/) never imports them; the bridge (chaos.bridge: an environment file -> running stand-ins)
is imported only by the faces (the CLI commands and the pytest plugin with its fixtures). No package circle."""
from __future__ import annotations

import ast
from pathlib import Path

from tests._support import REPO, strong_groups, write_tree

STAND_INS = "chaos.stack"
BRIDGE = "chaos.bridge"
# What the harness and the stand-ins share: the one exception tree and chaos.shared (the process helper, the
# signing scheme of request signatures and admin tokens, the Toxiproxy wire client).
GROUND = ("chaos.errors", "chaos.shared", "chaos.tokens")
FACES = ("chaos.commands", "chaos.cli", "chaos.pytest_plugin", "chaos.fixtures")


def _within(module: str, packages: tuple[str, ...] | str) -> bool:
    packages = (packages,) if isinstance(packages, str) else packages
    return any(module == p or module.startswith(p + ".") for p in packages)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path, *, at_load: bool = False) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in the file, those inside functions included; with at_load, only
    those the module runs when it is imported (its top level, not a function's body or a TYPE_CHECKING block)."""
    me = module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = []
    for node in (tree.body if at_load else ast.walk(tree)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if module == "chaos" or (node.level and not node.module):  # `from chaos import x`: x may be a module
                out += [(node.lineno, f"{module}.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, module))
    return out


def crossings(root: Path = REPO) -> list[str]:
    """Every import through the wall, as 'path:line: module -> module (why)'."""
    files = [*sorted((root / "chaos").rglob("*.py")), *sorted((root / "suites").rglob("*.py"))]
    out = []
    for path in files:
        me = module_name(path, root)
        for line, target in imports(path, root):
            if not _within(target, "chaos"):
                continue
            where = f"{path.relative_to(root)}:{line}: {me} -> {target}"
            if _within(me, STAND_INS):
                if not _within(target, (STAND_INS, *GROUND)):
                    out.append(f"{where} (a stand-in imports the harness)")
            elif _within(me, GROUND):
                if not _within(target, GROUND):
                    out.append(f"{where} (the shared ground imports beyond itself)")
            elif _within(me, BRIDGE):
                continue
            elif _within(target, BRIDGE) and not _within(me, FACES):
                out.append(f"{where} (only the faces use the bridge)")
            elif _within(target, STAND_INS) and not _within(me, FACES):
                out.append(f"{where} (the harness imports a stand-in)")
    return sorted(out, key=lambda o: (o.split(":")[0], int(o.split(":")[1])))


def package_graph(root: Path = REPO) -> dict[str, set[str]]:
    """chaos's packages (chaos.load, chaos.resilience, ...) and the packages each imports as it loads (an import
    inside a function is taken when it runs, after both packages loaded). The front door (chaos/__init__.py)
    imports everything by design and stands apart."""
    def package(module: str) -> str:
        return ".".join(module.split(".")[:2])

    graph: dict[str, set[str]] = {}
    for path in sorted((root / "chaos").rglob("*.py")):
        me = package(module_name(path, root))
        if me == "chaos":
            continue
        graph.setdefault(me, set())
        graph[me] |= {package(t) for _, t in imports(path, root, at_load=True)
                      if _within(t, "chaos") and package(t) not in (me, "chaos")}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one package (Tarjan)."""
    return [sorted(g) for g in strong_groups(graph)]


def test_no_import_crosses_the_wall() -> None:
    found = crossings()
    assert found == [], f"{len(found)} crossings:\n" + "\n".join(found)


def test_no_package_circle() -> None:
    assert circles(package_graph()) == []


def test_the_wall_check_finds_what_it_forbids(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {
        "chaos/__init__.py": "",
        "chaos/stack/sim.py": "from chaos.errors import ChaosError\nfrom chaos.env import load\n"
                              "def f():\n    from ..faults import tokens\n",
        "chaos/shared/proc.py": "from chaos.targets import make_target\n",
        "chaos/load/run.py": "def f():\n    from chaos.stack.launcher import EmbeddedStack\n"
                             "from chaos.bridge import up\nfrom chaos import stack\n",
        "chaos/commands/stack.py": "from chaos.bridge import up\nfrom chaos.stack.sim import cli\n",
        "chaos/bridge.py": "from chaos.stack.launcher import EmbeddedStack\nfrom chaos.env import load\n",
        "suites/test_x.py": "import chaos.stack.gateway\n",
    })
    assert crossings(root) == [
        "chaos/load/run.py:2: chaos.load.run -> chaos.stack.launcher (the harness imports a stand-in)",
        "chaos/load/run.py:3: chaos.load.run -> chaos.bridge (only the faces use the bridge)",
        "chaos/load/run.py:4: chaos.load.run -> chaos.stack (the harness imports a stand-in)",
        "chaos/shared/proc.py:1: chaos.shared.proc -> chaos.targets (the shared ground imports beyond itself)",
        "chaos/stack/sim.py:2: chaos.stack.sim -> chaos.env (a stand-in imports the harness)",
        "chaos/stack/sim.py:4: chaos.stack.sim -> chaos.faults (a stand-in imports the harness)",
        "suites/test_x.py:1: suites.test_x -> chaos.stack.gateway (the harness imports a stand-in)"]


def test_the_circle_check_finds_a_circle(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {"chaos/__init__.py": "from chaos.load import x\n",
                            "chaos/load/__init__.py": "", "chaos/load/runner.py": "from chaos.resilience import backoff\n",
                            "chaos/resilience/client.py": "from chaos.load.records import Record\n"
                                                          "def f():\n    from chaos.faults import base\n",
                            "chaos/faults/base.py": "from chaos.resilience import client\n"})
    assert circles(package_graph(root)) == [["chaos.load", "chaos.resilience"]]
    assert circles({"chaos.load": {"chaos.resilience"}, "chaos.resilience": {"chaos.load", "chaos.errors"},
                    "chaos.errors": set()}) == [["chaos.load", "chaos.resilience"]]
