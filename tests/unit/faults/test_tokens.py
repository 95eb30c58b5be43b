"""Tokens by reference: values resolve at use time, records carry only the source."""
from __future__ import annotations

import json

import pytest

from chaos.errors import ConfigError
from chaos.faults import _undo
from chaos.faults.tokens import TokenRef, from_record, stack_token


def test_sources_resolve_and_describe_without_the_value(tmp_path, monkeypatch):
    f = tmp_path / "t"
    f.write_text("secret-from-file\n")
    monkeypatch.setenv("MY_TOKEN", "secret-from-env")
    for ref, value in ((TokenRef(file=str(f)), "secret-from-file"), (TokenRef(env="MY_TOKEN"), "secret-from-env"),
                       (TokenRef(literal="secret-literal"), "secret-literal")):
        assert ref.value() == value
        assert value not in json.dumps(ref.describe()) and value not in repr(ref)
    assert from_record({"literal": "<redacted>"}) is None
    assert from_record(TokenRef(file=str(f)).describe()).value() == "secret-from-file"


def test_missing_sources_are_one_line_config_errors(tmp_path, monkeypatch):
    monkeypatch.delenv("NOPE_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="NOPE_TOKEN"):
        TokenRef(env="NOPE_TOKEN").value()
    with pytest.raises(ConfigError, match="cannot read"):
        TokenRef(file=str(tmp_path / "missing")).value()


def test_stack_token_is_random_private_and_stable(tmp_path):
    a, b = stack_token(tmp_path), stack_token(tmp_path)
    assert a == b and len(a.value()) >= 24
    assert (tmp_path / "admin.token").stat().st_mode & 0o777 == 0o600
    assert stack_token(tmp_path / "other").value() != a.value()


def test_an_undo_step_refuses_a_token_in_its_headers():
    with pytest.raises(ValueError, match="auth="):
        _undo.http("DELETE", "http://127.0.0.1:1/x", {"Authorization": "Bearer abc"})
    step = _undo.http("DELETE", "http://127.0.0.1:1/x", auth={"file": "/tmp/t"})
    assert step["auth"] == {"file": "/tmp/t"} and step["headers"] == {}
