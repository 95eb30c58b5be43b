"""Run one of the shipped suites as a team does, on a copy of environments/local.yaml on free ports, under
--require-proven; and read the release checklist's row of an item from its output."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tests._support import REPO
from tests.standins.stack.stack_env import write_env


def run_suite_on_local_copy(tmp_path: Path, suite: str, timeout: int = 540,
                            args: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """`suite` (with pytest `args`) on a fresh copy of local under --require-proven."""
    env_file = write_env(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "CHAOS_REQUIRE"}  # a skip inside is an outcome here
    return subprocess.run([sys.executable, "-m", "pytest", suite, *args, "--env", str(env_file), "--require-proven",
                           "-p", "no:cacheprovider", "-q", "-rs", "--basetemp", str(tmp_path / "run")],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


def checklist_status(out: str, item: str) -> str:
    """The status the checklist's row of `item` says (proven, FAILED, NOT ...), '' where there is no row."""
    row = next((line for line in out.splitlines() if line.startswith(item + " ")), "")
    return row.split()[1] if len(row.split()) > 1 else ""
