"""Regenerate the TYPE_CHECKING block and `__all__` of chaos/__init__.py from chaos/_front.py.

Add a name to the front door in chaos/_front.py (and to docs/own-suites.md), run
`python scripts/front_door.py`; tests/integration/api/test_front_door.py fails until both agree."""
from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from chaos._front import FRONT  # noqa: E402

ERRORS = ["ChaosError", "ConfigError", "FaultError", "FaultNotEffective", "LoadError", "SafetyError", "SLOViolation",
          "StackError", "TargetError", "__version__"]


def wrap(items: list[str], indent: str, width: int = 118) -> list[str]:
    out, cur = [], indent
    for it in items:
        if len(cur) + len(it) + 2 > width and cur.strip():
            out.append(cur.rstrip())
            cur = indent
        cur += it + ", "
    return [*out, cur.rstrip()]


def block() -> list[str]:
    mods: dict[str, list[str]] = defaultdict(list)
    for name, (mod, attr) in FRONT.items():
        if attr is not None:
            mods[mod].append(f"{attr} as {name}")  # `x as x`: an explicit re-export for mypy --strict and ruff
    lines = []
    for mod in sorted(mods):
        names = sorted(mods[mod], key=str.lower)
        one = f"    from {mod} import " + ", ".join(names)
        lines += [one] if len(one) <= 120 else [f"    from {mod} import (", *wrap(names, "        "), "    )"]
    for name, (mod, attr) in FRONT.items():
        if attr is None:
            pkg, _, leaf = mod.rpartition(".")
            lines.append(f"    from {pkg} import {leaf} as {name}")
    return lines


def main() -> None:
    path = ROOT / "chaos" / "__init__.py"
    s = path.read_text(encoding="utf-8")
    s = re.sub(r"(if _typing\.TYPE_CHECKING:[^\n]*\n)(    .*\n)*", lambda m: m.group(1) + "\n".join(block()) + "\n", s)
    names = wrap([f'"{n}"' for n in [*ERRORS, *FRONT]], "    ")
    s = re.sub(r"(__all__ = \[[^\n]*\n).*?\n\]\n", lambda m: m.group(1) + "\n".join(names) + "\n]\n", s, flags=re.S)
    path.write_text(s, encoding="utf-8")


if __name__ == "__main__":
    main()
