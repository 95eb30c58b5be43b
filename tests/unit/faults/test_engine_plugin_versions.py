"""Versions said, never guessed: the engine plugin patches only the vLLM versions it supports; on another it
patches nothing, says why (one log line, its control directory), and every engine fault aimed there is
refused as "not proven: the engine plugin does not support vLLM X.Y"; `chaos env check` names the version."""
from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

import pytest

import chaos_engine_plugin as plugin
from chaos.env import load
from chaos.env_check import engine_plugin as check
from chaos.env_check.http import Answer
from chaos.errors import FaultError
from chaos.faults.engine_plugin import EngineFault, engine_step_death, plugin_unsupported
from chaos.fixtures.stack import StackHandle
from chaos_engine_plugin import control as C
from chaos_engine_plugin import hooks
from chaos_engine_plugin.versions import SUPPORTED_VLLM, major_minor, unsupported


def test_versions_are_matched_on_major_minor() -> None:
    assert SUPPORTED_VLLM == ("0.32",)
    assert [major_minor(v) for v in ("0.32.0", "0.32.1+cpu", "v0.32.0rc1", "1.0", "dev", None)] == \
        ["0.32", "0.32", "0.32", "1.0", None, None]
    assert unsupported("0.32.0") is None and unsupported("0.32.4+cu128") is None
    assert unsupported("0.33.1") == "vLLM 0.33 not supported (supports 0.32)"
    assert unsupported("0.3.2") == "vLLM 0.3 not supported (supports 0.32)"
    assert unsupported("dev") == "vLLM 'dev' not supported (supports 0.32)"
    assert unsupported(None) == "vLLM 'unknown' not supported (supports 0.32)"


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[Path, list[Any]]:
    """A process about to register the plugin with a control directory; hooks.install recorded, not run."""
    ctl = tmp_path / "ctl"
    monkeypatch.setenv(C.ENV_VAR, str(ctl))
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "cache"))
    monkeypatch.setattr(plugin, "_registered", False)
    installed: list[Any] = []
    monkeypatch.setattr(hooks, "install", lambda c: installed.append(c) or [])
    return ctl, installed


def test_another_vllm_is_left_unpatched_and_says_so(fresh: tuple[Path, list[Any]], monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    ctl, installed = fresh
    monkeypatch.setattr(plugin, "installed_vllm", lambda: "0.33.1")
    with caplog.at_level(logging.WARNING, logger="vllm.llm_chaos"):
        plugin.register()
    assert installed == [] and os.environ["VLLM_CACHE_ROOT"].endswith("cache")  # nothing of vLLM touched
    assert sorted(os.listdir(ctl)) == [f"unsupported.{os.getpid()}.0.33.1"]
    lines = [r.getMessage() for r in caplog.records if r.name == "vllm.llm_chaos"]
    assert lines == [f"llm-chaos engine plugin: vLLM 0.33 not supported (supports 0.32): no engine fault is "
                     f"installed in pid {os.getpid()}"]


def test_a_supported_vllm_gets_the_hooks(fresh: tuple[Path, list[Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    _, installed = fresh
    monkeypatch.setattr(plugin, "installed_vllm", lambda: "0.32.0")
    plugin.register()
    assert len(installed) == 1 and os.environ["VLLM_CACHE_ROOT"].endswith(plugin.CACHE_SUBDIR)


def test_an_unreadable_control_directory_never_crashes_the_engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(C.ENV_VAR, str(tmp_path / "file" / "ctl"))  # under a file: cannot be made
    monkeypatch.setattr(plugin, "_registered", False)
    monkeypatch.setattr(plugin, "installed_vllm", lambda: "0.40.0")
    plugin.register()


def test_the_newest_registration_decides() -> None:
    assert C.registered([]) is None and C.registered(["a.json", "a.fired.12"]) is None
    assert C.registered(["unsupported.7.0.33.1", "loaded.5"]) == ("unsupported", "0.33.1")
    assert C.registered(["x.json", "loaded.9", "unsupported.7.0.33.1"]) == ("loaded", None)
    assert C.list_command("/d") == ["ls", "-1t", "/d"]


class Replica:
    """A target whose control directory is a real one on this disk; its exec plays `ls -1t` (unit tests
    start no process): the names, newest first."""

    name = "replica-a"

    def __init__(self, ctl: Path) -> None:
        self.env = {C.ENV_VAR: str(ctl)}

    def is_running(self) -> bool:
        return True

    def exec(self, argv: list[str]) -> tuple[int, str]:
        assert argv[:2] == ["ls", "-1t"], argv
        d = Path(argv[2])
        if not d.is_dir():
            return 2, f"ls: cannot access '{d}': No such file or directory\n"
        names = sorted(os.listdir(d), key=lambda n: (d / n).stat().st_mtime_ns, reverse=True)
        return 0, "".join(f"{n}\n" for n in names)


def _unsupported_replica(tmp_path: Path) -> Replica:
    ctl = tmp_path / "ctl"
    C.Control(str(ctl)).mark_loaded()  # an earlier start on 0.32 ...
    old = ctl / f"loaded.{os.getpid()}"
    os.utime(old, (1000.0, 1000.0))
    C.Control(str(ctl)).mark_unsupported("0.33.1")  # ... then this one on 0.33
    return Replica(ctl)


def test_an_engine_fault_on_another_vllm_is_refused_not_proven(tmp_path: Path) -> None:
    t = _unsupported_replica(tmp_path)
    why = "the engine plugin does not support vLLM 0.33 (supports 0.32)"
    assert plugin_unsupported(t) == why  # type: ignore[arg-type]
    for fault in (EngineFault(t, "allreduce-hang", rank=1), EngineFault(t, "tokenizer-crash"),  # type: ignore[arg-type]
                  engine_step_death(t, rank=0)):  # type: ignore[arg-type]
        with pytest.raises(FaultError, match=re.escape(f"replica-a: not proven: {why}")):
            fault._preflight()
        assert not list((tmp_path / "ctl").glob("*.json"))  # nothing armed


def test_a_supported_replica_is_not_refused(tmp_path: Path) -> None:
    ctl = tmp_path / "ctl"
    C.Control(str(ctl)).mark_loaded()
    t = Replica(ctl)
    assert plugin_unsupported(t) is None  # type: ignore[arg-type]
    EngineFault(t, "tokenizer-crash")._preflight()  # type: ignore[arg-type]


def test_each_engine_scenario_skips_not_proven(tmp_path: Path) -> None:
    env = load("local-vllm", environ={})
    t = _unsupported_replica(tmp_path)
    stack = StackHandle(env, {n.name: t for n in env.targets}, "run", None)  # type: ignore[misc]
    why = "not proven: the engine plugin does not support vLLM 0.33 (supports 0.32)"
    for scenario in (lambda: stack.engine_death("replica-a"), lambda: stack.engine_plugin_fault("replica-a", "allreduce-hang"),
                     stack.tokenizer_crash_faults, lambda: stack.leak_faults(["replica-c"], 1 << 20)):
        with pytest.raises(pytest.skip.Exception, match=re.escape(why)):
            scenario()


def test_env_check_names_the_version(monkeypatch: pytest.MonkeyPatch) -> None:
    env = load("local-vllm", environ={})
    monkeypatch.setattr(check, "get", lambda url, timeout: Answer(200, b'{"version": "0.33.1"}'))
    lines = check.engine_plugin_lines(env, 1.0)
    assert len(lines) == len(env.targets) == 3
    assert lines[0] == ("engine plugin: vLLM 0.33 not supported (supports 0.32): its engine scenarios are not proven "
                        "here (replica-a, GET http://127.0.0.1:19201/version)")
    assert not check.check_engine_plugin(env.targets[0], 1.0).ok
    monkeypatch.setattr(check, "get", lambda url, timeout: Answer(200, b'{"version": "0.32.0"}'))
    p = check.check_engine_plugin(env.targets[0], 1.0)
    assert p.ok and p.detail == "vLLM 0.32 supported (supports 0.32)"
    monkeypatch.setattr(check, "get", lambda url, timeout: Answer(None, error="ConnectionRefusedError: refused"))
    p = check.check_engine_plugin(env.targets[0], 1.0)
    assert not p.ok and "vLLM version unknown" in p.detail and "refused" in p.detail


def test_take_as_makes_the_installed_vllm_another_version(monkeypatch: pytest.MonkeyPatch) -> None:
    from chaos_engine_plugin import versions

    monkeypatch.setenv(versions.TAKE_AS_VAR, "0.31.2")
    assert versions.installed_vllm() == "0.31.2" and unsupported(versions.installed_vllm()) is not None
    monkeypatch.setenv(versions.TAKE_AS_VAR, " ")
    assert versions.installed_vllm() != " "


def test_env_check_believes_the_plugins_own_registration(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """/version says a supported vLLM, but the plugin registered as unsupported in the replica: the check fails,
    naming both; a registration that loaded keeps it ok; no directory on this host: /version alone."""
    env = load("local-vllm", environ={})
    monkeypatch.setattr(check, "get", lambda url, timeout: Answer(200, b'{"version": "0.32.0"}'))
    t = env.targets[0]
    directory = tmp_path / "engine-faults" / t.name
    directory.mkdir(parents=True)
    assert check.check_engine_plugin(t, 1.0, str(tmp_path)).ok  # nothing registered yet
    C.Control(str(directory)).mark_unsupported("0.31.2")
    p = check.check_engine_plugin(t, 1.0, str(tmp_path))
    assert not p.ok and p.detail == ("vLLM 0.31 not supported (supports 0.32), says the plugin's registration "
                                     "(GET /version: 0.32.0): its engine scenarios are not proven here")
    later = directory / "loaded.99"
    later.touch()
    os.utime(later, (os.path.getmtime(directory) + 5,) * 2)
    assert check.check_engine_plugin(t, 1.0, str(tmp_path)).ok
    assert check.check_engine_plugin(t, 1.0, str(tmp_path / "elsewhere")).ok
