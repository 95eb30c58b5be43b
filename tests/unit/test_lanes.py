"""Every test lives in a lane (docs/testing.md), and the unit lane's guard bites."""
from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

# the guard raises UnitLaneViolation, an AssertionError (the conftest module is not importable by name)


TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
LANES = ("unit", "integration", "standins", "e2e", "vllm")  # the folders under tests/ the Makefile's lanes run


def test_every_test_file_lives_in_a_lane() -> None:
    stray = sorted(str(p.relative_to(REPO)) for p in TESTS.rglob("test_*.py")
                   if p.relative_to(TESTS).parts[0] not in LANES)
    assert stray == [], f"test files outside tests/{{{','.join(LANES)}}}/ (no lane runs them): {stray}"


def test_the_makefile_runs_every_lane() -> None:
    make = (REPO / "Makefile").read_text(encoding="utf-8")
    missing = [lane for lane in LANES if f"tests/{lane}" not in make]
    assert missing == [], f"lanes the Makefile does not name: {missing}"


def test_the_guard_refuses_a_socket() -> None:
    with socket.socket() as s, pytest.raises(AssertionError, match="tests/unit allows no process"):
        s.bind(("127.0.0.1", 0))
    with pytest.raises(AssertionError, match="create_connection"):
        socket.create_connection(("127.0.0.1", 9))


def test_the_guard_refuses_a_process() -> None:
    with pytest.raises(AssertionError, match=r"subprocess.Popen\(\['true'\]"):
        subprocess.run(["true"], check=False)


def _module_name(p: Path) -> str:
    """The name pytest's default (prepend) import gives a test file: its basename, prefixed by the
    packages (folders with __init__.py) it sits in."""
    parts = [p.stem]
    d = p.parent
    while (d / "__init__.py").exists():
        parts.insert(0, d.name)
        d = d.parent
    return ".".join(parts)


def test_test_modules_have_unique_import_names() -> None:
    # two files with one import name collect in separate lanes but fail `pytest tests` (and
    # `--collect-only`) with "import file mismatch"
    seen: dict[str, list[str]] = {}
    for p in sorted(TESTS.rglob("test_*.py")):
        seen.setdefault(_module_name(p), []).append(str(p.relative_to(REPO)))
    clashes = {name: files for name, files in seen.items() if len(files) > 1}
    assert clashes == {}, f"test files sharing an import name (rename one): {clashes}"


def test_ci_runs_every_lane_with_the_tools_required() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    steps = ("make lint", "make typecheck", "make test-unit", "make test-integration", "make test-standins",
             "make test-e2e", ".ci/vllm-lane", ".ci/lab-lane", "dockerd",
             "CHAOS_REQUIRE=docker,toxiproxy,faultproxy,chromium,allure,lab,gateways,prometheus")
    missing = [step for step in steps if step not in ci]
    assert missing == [], f".ci/run lacks: {missing}"
    assert "pkill" not in ci, ".ci/run ends only the jobs it started, by process group"
