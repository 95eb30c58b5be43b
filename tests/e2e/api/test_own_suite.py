"""examples/own-suite as a team would use it: the wheel built from this tree, installed alone in a fresh
venv (its dependencies from PyPI, no clone on sys.path), the folder copied to an empty directory, and
its `pytest` green against the embedded default (`local`, carried by the wheel) and against its own
environment file. The external programs the embedded stack runs (toxiproxy-server, chaos-faultproxy)
are given as a team would give them: $CHAOS_TOXIPROXY_BIN and $CHAOS_FAULTPROXY_BIN."""
from __future__ import annotations

import os
import re
import shutil
import ssl
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from chaos.pytest_plugin import require_component
from tests._support import REPO, free_port_offset, toxiproxy_binary

EXAMPLE = REPO / "examples" / "own-suite"


def _pip_settings() -> dict[str, str]:
    """pip's own settings here (`pip config list`: files and PIP_* variables), by name: index-url, cert, ..."""
    listed = _run([sys.executable, "-m", "pip", "config", "list"], REPO, dict(os.environ), 60).stdout
    found = (re.match(r"^[^.\s]*\.([\w-]+)='(.*)'$", line) for line in listed.splitlines())
    return {m[1]: m[2] for m in found if m}


def _registry_unreachable() -> str | None:
    """Why the fresh venv cannot get the wheel's dependencies (None when the index pip uses answers).

    The index and the CA file are pip's own (a mirror in PIP_INDEX_URL or pip.conf, a company CA), so
    the skip names the registry the install would really have used, and why it could not."""
    settings = _pip_settings()
    index = settings.get("index-url", "https://pypi.org/simple").rstrip("/")
    context = ssl.create_default_context(cafile=settings.get("cert") or None)
    try:
        with urllib.request.urlopen(f"{index}/pytest/", timeout=15, context=context) as r:
            if r.status == 200:
                return None
            why = f"it answered {r.status}"
    except (OSError, ValueError) as e:
        why = str(getattr(e, "reason", e)) or type(e).__name__
    return (f"the package registry {index} (pip's index-url) is unreachable ({why}): the fresh venv installs the "
            "wheel's dependencies from it; PIP_INDEX_URL names a mirror")


def _free_offset(*env_files: Path) -> int:
    """A CHAOS_PORT_OFFSET under which every port of these environment files is free now."""
    return free_port_offset(*(f.read_text(encoding="utf-8") for f in env_files))


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding the wheel of this tree and its dependencies, nothing of the clone."""
    require_component("pypi", _registry_unreachable())
    root = tmp_path_factory.mktemp("own-suite")
    src = root / "src"  # only what the wheel is built from: the clone's build outputs stay out of it
    shutil.copytree(REPO / "chaos", src / "chaos", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(root / "dist"), str(src)],
                 root, dict(os.environ), 300)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (root / "dist").glob("llm_chaos-*.whl")
    venv = root / "venv"
    base = getattr(sys, "_base_executable", sys.executable)  # the interpreter, not this venv's
    assert _run([base, "-m", "venv", str(venv)], root, dict(os.environ), 120).returncode == 0
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # --no-compile: the byte-code of every dependency (most never imported here) was a third of the install
    got = _run([str(venv / "bin" / "pip"), "install", "-q", "--no-compile", str(wheel)], root, clean, 900)
    assert got.returncode == 0, got.stdout[-3000:] + got.stderr[-3000:]
    return venv


def _suite_env(venv: Path, offset: int, state: Path) -> dict[str, str]:
    from chaos.stack.faultproxy import find_binary

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "CHAOS_"))}
    return {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", "CHAOS_PORT_OFFSET": str(offset),
            "XDG_STATE_HOME": str(state), "CHAOS_TOXIPROXY_BIN": toxiproxy_binary() or "",
            "CHAOS_FAULTPROXY_BIN": find_binary()}


@pytest.mark.slow
def test_own_suite_runs_green_from_the_wheel_alone(fresh_venv: Path, tmp_path: Path) -> None:
    require_component("toxiproxy", None if toxiproxy_binary() else "no toxiproxy-server (make setup)")
    suite = tmp_path / "our-repo" / "chaos-scenarios"  # an empty folder in another repository
    shutil.copytree(EXAMPLE, suite, ignore=shutil.ignore_patterns(".state", "__pycache__"))
    offset = _free_offset(REPO / "chaos" / "env" / "builtin" / "local.yaml", EXAMPLE / "environments" / "my-stack.yaml")
    env = _suite_env(fresh_venv, offset, tmp_path / "state")
    where = _run([str(fresh_venv / "bin" / "python"), "-c", "import chaos, sys; print(chaos.__file__); print(sys.path)"],
                 suite, env, 60)
    assert where.returncode == 0 and where.stdout.startswith(str(fresh_venv)), where.stdout + where.stderr
    assert str(REPO) not in where.stdout, f"the clone is on sys.path: {where.stdout}"
    for args, state in (([], tmp_path / "state" / "llm-chaos" / f"local-port+{offset}"),
                        (["--env", "environments/my-stack.yaml"], suite / ".state" / f"my-stack-port+{offset}")):
        ran = _run([str(fresh_venv / "bin" / "pytest"), "--require-proven", *args], suite, env, 420)
        out = ran.stdout + ran.stderr
        assert ran.returncode == 0, out[-6000:]
        # nothing skipped, nothing else; pytest adds "(H:MM:SS)" to a run of 60 s or more
        assert re.search(r"^=+ 2 passed in [\d.]+s( \(\d+:\d\d:\d\d\))? =+$", out, re.M), out[-3000:]
        assert state.is_dir(), f"{args or 'the default'} did not run on the environment meant: no {state}"
