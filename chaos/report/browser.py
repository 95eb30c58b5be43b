"""Open a built report in headless Chromium: list the tests it shows, or take a screenshot.

The report is served over http on 127.0.0.1 (a free port) because file:// blocks the report's fetches.
"""
from __future__ import annotations

import contextlib
import functools
import html
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from chaos.report.html import ReportError

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--hide-scrollbars",
]
_LEAF = re.compile(r'data-testid="tree-leaf-title"[^>]*>([^<]*)<')


def find_chromium() -> str | None:
    """$CHAOS_CHROMIUM, /usr/bin/chromium, or chromium / chromium-browser / google-chrome on PATH."""
    env = os.environ.get("CHAOS_CHROMIUM")
    if env:
        return env if Path(env).is_file() else None
    if Path("/usr/bin/chromium").is_file():
        return "/usr/bin/chromium"
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass


@contextlib.contextmanager
def serve(directory: str | Path) -> Iterator[str]:
    """Serve `directory` on 127.0.0.1 at a free port for the duration; yields the base URL."""
    handler = functools.partial(_Quiet, directory=str(directory))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="report-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _run_chromium(args: list[str], timeout_s: float, chromium: str | None) -> str:
    exe = chromium or find_chromium()
    if exe is None:
        raise ReportError("chromium not found (Debian: apt-get install chromium; or set CHAOS_CHROMIUM)")
    with tempfile.TemporaryDirectory(prefix="chaos-chromium-") as profile:
        cmd = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise ReportError(f"chromium did not finish within {timeout_s:g} s") from None
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        raise ReportError(f"chromium failed (exit {proc.returncode}): {last[0]}")
    return proc.stdout


def dump_dom(url: str, *, budget_ms: int = 10000, timeout_s: float = 90, chromium: str | None = None) -> str:
    """The DOM of `url` after the page's scripts ran for `budget_ms` of virtual time."""
    return _run_chromium([f"--virtual-time-budget={budget_ms}", "--dump-dom", url], timeout_s, chromium)


def tree_titles(dom: str) -> list[str]:
    """Test titles listed in an Allure 3 report's rendered tree."""
    return [html.unescape(m).strip() for m in _LEAF.findall(dom)]


def listed_tests(report_dir: str | Path, **kw: object) -> list[str]:
    """Open the report in headless Chromium and return the test names it lists."""
    with serve(report_dir) as base:
        return tree_titles(dump_dom(base + "index.html", **kw))  # type: ignore[arg-type]


def screenshot(
    report_dir: str | Path, out_png: str | Path, *, fragment: str = "", size: tuple[int, int] = (1400, 900),
    budget_ms: int = 10000, timeout_s: float = 90, chromium: str | None = None,
) -> Path:
    """PNG screenshot of a report (`fragment`, e.g. '#/some-id', selects a view); returns the PNG path."""
    out = Path(out_png).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with serve(report_dir) as base:
        _run_chromium([f"--virtual-time-budget={budget_ms}", f"--window-size={size[0]},{size[1]}",
                       f"--screenshot={out}", base + "index.html" + fragment], timeout_s, chromium)
    if not out.is_file() or out.stat().st_size == 0:
        raise ReportError(f"chromium wrote no screenshot to {out}")
    return out
