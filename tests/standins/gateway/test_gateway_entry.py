"""The gateway's own entry point (`python -m chaos.stack.gateway`): flags alone, no harness CLI, no environment."""
from __future__ import annotations

import dataclasses

import pytest

from chaos.env.model import BreakerPolicy
from chaos.errors import ConfigError
from chaos.stack.gateway.__main__ import parse
from chaos.stack.gateway.rules import DefaultRules


def test_flag_defaults_are_an_environments_breaker_defaults() -> None:
    """The stand-in cannot import the environment schema; this keeps its defaults from drifting away from it."""
    env = BreakerPolicy()
    assert {f.name: getattr(env, f.name) for f in dataclasses.fields(DefaultRules)} == \
        dataclasses.asdict(DefaultRules())


def test_flags_become_settings() -> None:
    settings, level = parse(["--listen", "127.0.0.1:9", "--stable", "http://127.0.0.1:1", "--canary",
                             "c=127.0.0.1:2", "--window-s", "3", "--no-normalize", "--log-level", "debug"])
    assert [(r.name, r.url, r.pool) for r in settings.replicas] == [
        ("stable-1", "http://127.0.0.1:1", "stable"), ("c", "http://127.0.0.1:2", "canary")]
    assert (settings.policy.window_s, settings.policy.normalize_unicode, settings.listen, level) == \
        (3.0, False, "127.0.0.1:9", "debug")


def test_a_bad_replica_is_one_line_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"--stable: expected \[NAME=\]http://HOST:PORT"):
        parse(["--stable", "ftp://x"])
