"""`python -m chaos.report.screenshot REPORT_DIR OUT.png [WIDTHxHEIGHT] [FRAGMENT]` (for the README image)."""
from __future__ import annotations

import sys
from pathlib import Path

from chaos.errors import ChaosError

USAGE = "usage: screenshot-report REPORT_DIR OUT.png [WIDTHxHEIGHT] [FRAGMENT]"


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise ChaosError(f"size {text!r}: expected WIDTHxHEIGHT, e.g. 1400x900") from None
    if not (200 <= w <= 4000 and 200 <= h <= 4000):
        raise ChaosError(f"size {text!r}: width and height must be within 200..4000")
    return w, h


def main(argv: list[str] | None = None) -> int:
    """Take the screenshot; one error line and exit 2 on bad input or a failing browser."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2 or len(args) > 4:
        print(USAGE, file=sys.stderr)
        return 2
    from chaos.report.browser import screenshot

    try:
        report = Path(args[0])
        if not (report / "index.html").is_file():
            raise ChaosError(f"report dir {report}: no index.html (build it with scripts/report.sh)")
        size = _size(args[2]) if len(args) > 2 else (1400, 900)
        out = screenshot(report, args[1], size=size, fragment=args[3] if len(args) > 3 else "")
    except ChaosError as e:
        print(f"screenshot-report: error: {e}", file=sys.stderr)
        return 2
    print(f"screenshot: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
