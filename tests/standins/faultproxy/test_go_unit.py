"""The fault proxy's own Go tests and vet, run from the harness's test command."""
from __future__ import annotations

import os
import shutil
import subprocess

from chaos.pytest_plugin import require_component
from chaos.stack.faultproxy import SRC


def test_go_vet_and_go_test_pass() -> None:
    go = shutil.which("go") or next((p for p in ("/usr/local/go/bin/go",) if os.path.exists(p)), None)
    require_component("faultproxy", None if go else "Go is not installed")
    for args in (["vet", "./..."], ["test", "-count=1", "./..."]):
        p = subprocess.run([go, *args], cwd=SRC, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, f"go {' '.join(args)}:\n{p.stdout[-3000:]}{p.stderr[-3000:]}"
