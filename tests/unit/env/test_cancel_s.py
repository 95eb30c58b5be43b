"""`slas.cancel_s`: how long every hop may take to let go of a request whose client hung up (default 5 s);
a bad value is one line naming the field."""
from __future__ import annotations

import pytest

from chaos.env import parse
from chaos.errors import ConfigError

HEAD = "name: t\nendpoints: {api: 'http://127.0.0.1:1'}\n"


def test_default_and_own_value() -> None:
    assert parse(HEAD, "env.yaml", environ={}).slas.cancel_s == 5.0
    assert parse(HEAD + "slas: {cancel_s: 2.5}\n", "env.yaml", environ={}).slas.cancel_s == 2.5


@pytest.mark.parametrize("value", ["0", "-1", "601", "soon"])
def test_bad_cancel_s_is_one_line_naming_the_field(value: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse(HEAD + f"slas: {{cancel_s: {value}}}\n", "env.yaml", environ={})
    msg = str(e.value)
    assert msg.startswith("env.yaml:3: slas.cancel_s: ") and "\n" not in msg, msg
