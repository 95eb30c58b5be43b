"""Build the HTML report with the Allure 3 CLI (npm package `allure`, installed project-locally)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from chaos.errors import ChaosError, ConfigError

ALLURE_VERSION = "3.18.0"
TOOLS_PREFIX = Path(".tools") / "allure"
_BIN = Path("node_modules") / ".bin" / "allure"


class ReportError(ChaosError):
    """The report could not be built or rendered (tool missing, tool failed)."""


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def find_allure(cwd: str | Path | None = None) -> Path | None:
    """The Allure 3 CLI: $CHAOS_ALLURE, ./.tools/allure, the repo's .tools/allure, then `allure` on PATH
    if it is version 3 (the Java Allure 2 CLI takes other flags)."""
    env = os.environ.get("CHAOS_ALLURE")
    if env:
        return Path(env) if Path(env).is_file() else None
    for base in (Path(cwd or Path.cwd()), _repo_root()):
        cand = base / TOOLS_PREFIX / _BIN
        if cand.is_file():
            return cand
    on_path = shutil.which("allure")
    if on_path:
        try:
            out = subprocess.run([on_path, "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        if out.strip().startswith("3"):
            return Path(on_path)
    return None


def install_allure(prefix: str | Path | None = None, version: str = ALLURE_VERSION) -> Path:
    """`npm install --prefix <prefix> allure@<version>` (default ./.tools/allure); returns the CLI path."""
    prefix = Path(prefix) if prefix else Path.cwd() / TOOLS_PREFIX
    npm = shutil.which("npm")
    if npm is None:
        raise ReportError("npm not found: install Node.js 20+ to build the HTML report")
    prefix.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([npm, "install", "--prefix", str(prefix), f"allure@{version}", "--no-audit", "--no-fund"],
                          capture_output=True, text=True, timeout=600)
    cli = prefix / _BIN
    if proc.returncode != 0 or not cli.is_file():
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ReportError(f"npm install allure@{version} failed (exit {proc.returncode}): {last[0]}")
    return cli


def _check_results(results: Path) -> None:
    if not results.is_dir():
        raise ConfigError(f"results dir {results}: not found (run pytest with --alluredir {results})")
    if not any(results.glob("*-result.json")):
        raise ConfigError(f"results dir {results}: no *-result.json files (run pytest with --alluredir {results})")


def _categories(results: Path) -> list[dict[str, object]]:
    """The results' categories.json, else ours: Allure 3's default plugin reads them only from its config."""
    from chaos.report.results_dir import CATEGORIES

    try:
        rules = json.loads((results / "categories.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return CATEGORIES
    ok = isinstance(rules, list) and all(isinstance(r, dict) and r.get("name") for r in rules)
    return rules if ok else CATEGORIES


def _clear_output(out: Path) -> None:
    if not out.exists():
        return
    if not out.is_dir():
        raise ConfigError(f"report dir {out}: exists and is not a directory")
    if any(out.iterdir()) and not (out / "index.html").is_file():
        raise ConfigError(f"report dir {out}: not empty and not an Allure report; refusing to overwrite it")
    shutil.rmtree(out)


def generate(
    results: str | Path = "allure-results",
    out: str | Path = "allure-report",
    *,
    history: str | Path | None = None,
    name: str = "llm-chaos",
    cli: str | Path | None = None,
    timeout_s: float = 300,
) -> Path:
    """Build the HTML report from `results` into `out`; `history` (a JSONL file) keeps trends across runs.

    Returns the path of the report's index.html.
    """
    results, out = Path(results).resolve(), Path(out).resolve()
    _check_results(results)
    exe = Path(cli) if cli else find_allure()
    if exe is None:
        raise ReportError("Allure 3 CLI not found: run `scripts/report.sh --install` "
                          f"(npm install --prefix {TOOLS_PREFIX} allure@{ALLURE_VERSION})")
    _clear_output(out)
    config: dict[str, object] = {"name": name, "categories": {"rules": _categories(results)}}
    if history is not None:
        hist = Path(history).resolve()
        hist.parent.mkdir(parents=True, exist_ok=True)
        config["historyPath"] = str(hist)
    with tempfile.TemporaryDirectory(prefix="chaos-allure-") as tmp:
        rc = Path(tmp) / "allurerc.json"
        rc.write_text(json.dumps(config), encoding="utf-8")
        try:
            proc = subprocess.run([str(exe), "generate", str(results), "-o", str(out), "--config", str(rc)],
                                  capture_output=True, text=True, timeout=timeout_s, cwd=tmp)
        except subprocess.TimeoutExpired:
            raise ReportError(f"allure generate did not finish within {timeout_s:g} s") from None
        except OSError as e:
            raise ReportError(f"cannot run {exe}: {e}") from None
    index = out / "index.html"
    if proc.returncode != 0 or not index.is_file():
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ReportError(f"allure generate failed (exit {proc.returncode}): {last[0]}")
    return index
