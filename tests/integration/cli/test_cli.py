"""The `chaos` command's exit codes and one-line errors, run as a real process."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


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


def _env_options() -> dict[str, object]:
    """{'chaos stop': its --env parameter, ...} over every command and sub-command."""
    import typer.main

    from chaos import cli

    cli._register_all()
    out: dict[str, object] = {}

    def walk(cmd: object, path: str) -> None:
        for p in getattr(cmd, "params", []):
            if "--env" in getattr(p, "opts", []):
                out[path] = p
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            walk(sub, f"{path} {name}")

    walk(typer.main.get_command(cli.app), "chaos")
    return out


def test_every_env_option_reads_chaos_env_alike() -> None:
    opts = _env_options()
    # `chaos lab up --env` names what to deploy onto the lab's hosts, not the run a command acts on
    opts.pop("chaos lab up")
    assert {"chaos stop", "chaos cleanup", "chaos fault inject", "chaos fault ledger", "chaos gameday", "chaos explore",
            "chaos replay", "chaos capacity", "chaos baseline record", "chaos baseline diff", "chaos load",
            "chaos env up", "chaos env check"} <= set(opts), sorted(opts)
    wrong = {k: (p.envvar, p.help) for k, p in opts.items()  # type: ignore[attr-defined]
             if p.envvar != "CHAOS_ENV" or p.help != "environment name or YAML path"}  # type: ignore[attr-defined]
    assert not wrong, wrong
    defaults = {p.default for p in opts.values()}  # type: ignore[attr-defined]
    assert defaults == {"local", None}, defaults  # None: the gateway and backoff also run without one


@pytest.mark.parametrize("args", [["stop"], ["cleanup"], ["fault", "ledger"], ["fault", "inject", "latency"],
                                  ["gameday"], ["explore"], ["capacity", "--fault", "kill"], ["load"],
                                  ["baseline", "record"]])
def test_commands_name_the_environment_chaos_env_gives(args: list[str], tmp_path: Path) -> None:
    import os

    missing = tmp_path / "no-such.yaml"  # read before anything else is done: a wrong one touches nothing
    r = subprocess.run([sys.executable, "-m", "chaos.cli", *args], capture_output=True, text=True, timeout=60,
                       cwd=tmp_path, env={**os.environ, "CHAOS_ENV": str(missing)})
    assert r.returncode == 2 and r.stderr.strip() == f"chaos: error: {missing}: environment file not found", r.stderr
