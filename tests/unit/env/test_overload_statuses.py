"""`retry.overload_statuses`: the answers that mean "busy: back off" (default 429, 503, 529). The reference
client retries them on the policy's schedule; a bad value is one line naming the field."""
from __future__ import annotations

import pytest

from chaos.env import parse
from chaos.errors import ConfigError
from chaos.load.backoff import Backoff

HEAD = "name: t\nendpoints: {api: 'http://127.0.0.1:1'}\n"


def test_default_and_own_list() -> None:
    assert parse(HEAD, "env.yaml", environ={}).retry.overload_statuses == [429, 503, 529]
    assert parse(HEAD + "retry: {overload_statuses: [529, 598]}\n", "env.yaml", environ={}).retry.overload_statuses \
        == [529, 598]


@pytest.mark.parametrize("value, message", [
    ("[529, 404]", "env.yaml:3: retry.overload_statuses: expected HTTP error statuses a client may retry (400-599, "
                   "not 400, 401, 403, 404, 422), found 404"),
    ("[200]", "env.yaml:3: retry.overload_statuses: expected HTTP error statuses a client may retry (400-599, "
              "not 400, 401, 403, 404, 422), found 200"),
    ("[busy]", "env.yaml:3: retry.overload_statuses[0]: Input should be a valid integer, unable to parse string as "
               "an integer; found 'busy'"),
])
def test_bad_overload_statuses_is_one_line(value: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse(HEAD + f"retry: {{overload_statuses: {value}}}\n", "env.yaml", environ={})
    assert str(e.value) == message


def test_the_reference_client_retries_an_overload_status_not_in_retry_statuses() -> None:
    policy = parse(HEAD, "env.yaml", environ={}).retry
    assert 529 not in policy.retry_statuses
    assert Backoff(policy).should_retry(529, "http") is True
    none = parse(HEAD + "retry: {overload_statuses: []}\n", "env.yaml", environ={}).retry
    assert Backoff(none).should_retry(529, "http") is False  # a code nobody listed is not retried
    assert Backoff(policy).should_retry(529, "http", streamed=True) is False
