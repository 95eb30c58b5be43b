"""`import chaos` stays as cheap as the errors: nothing behind the door is imported until it is used (the CLI
and the reference client import it at every start)."""
from __future__ import annotations

import subprocess
import sys

from tests._support import REPO


def test_import_chaos_imports_nothing_behind_the_door():
    code = "import sys, chaos; print(sorted(m for m in sys.modules if m.startswith('chaos')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert out.strip() == "['chaos', 'chaos.errors']"
