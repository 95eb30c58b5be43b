"""`liveness:`: the team's liveness probe (absent: none declared, nothing judged); Kubernetes' defaults for what the
file leaves out; a bad value is one line naming the field."""
from __future__ import annotations

import pytest

from chaos.env import parse
from chaos.errors import ConfigError

HEAD = "name: t\nendpoints: {api: 'http://127.0.0.1:1'}\n"


def test_absent_is_none_and_the_defaults_are_kubernetes() -> None:
    assert parse(HEAD, "env.yaml", environ={}).liveness is None
    probe = parse(HEAD + "liveness: {}\n", "env.yaml", environ={}).liveness
    assert probe is not None and (probe.path, probe.timeout_s, probe.period_s, probe.failure_threshold) == \
        ("/health", 1.0, 10.0, 3)
    assert probe.describe() == "GET /health, 1 s timeout, every 10 s, restart after 3 failures in a row"


@pytest.mark.parametrize(("field", "value"), [("timeout_s", "0"), ("period_s", "-1"), ("failure_threshold", "0"),
                                              ("path", "/ping"), ("timeout", "1")])
def test_a_bad_value_is_one_line_naming_the_field(field: str, value: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse(HEAD + f"liveness: {{{field}: {value}}}\n", "env.yaml", environ={})
    msg = str(e.value)
    assert msg.startswith(f"env.yaml:3: liveness.{field}") and "\n" not in msg, msg
