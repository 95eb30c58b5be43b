"""The `chaos` command's exit codes and one-line errors, run as a real process."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def chaos(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    e = {**os.environ, "CHAOS_ENV_DIR": str(REPO / "environments"), **(env or {})}
    for var in ("CHAOS_ENV", "STAGING_API_KEY", "HF_TOKEN"):
        e.pop(var, None)
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args], capture_output=True, text=True,
                          timeout=60, env=e)


def test_env_check_ok() -> None:
    r = chaos("env", "check", "--env", "local")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("local: ok (3 targets")


def test_env_list() -> None:
    r = chaos("env", "list")
    assert r.returncode == 0 and {"local", "ci", "local-docker", "staging.example"} <= set(r.stdout.split())


@pytest.mark.parametrize(
    "args, expect",
    [
        (["env", "check", "--env", "nope"], "chaos: error: --env nope: unknown environment (available: ci, lab, local"),
        (["env", "check", "--env", "/no/such.yaml"], "chaos: error: /no/such.yaml: environment file not found"),
        (["env", "check", "--env", "staging.example"], "environment variable ${"),
    ],
)
def test_bad_env_exits_2_with_one_line(args: list[str], expect: str) -> None:
    r = chaos(*args)
    assert r.returncode == 2
    assert expect in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_unknown_command_and_option_are_usage_errors() -> None:
    assert chaos("no-such-command").returncode == 2
    r = chaos("env", "check", "--bogus")
    assert r.returncode == 2 and "No such option" in r.stderr and "Traceback" not in r.stderr


def test_version() -> None:
    r = chaos("version")
    assert r.returncode == 0 and r.stdout.strip() == "0.1.0"
