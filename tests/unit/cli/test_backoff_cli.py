"""`chaos backoff-check` output when a rule could not be proven: never a PASS."""
from __future__ import annotations

from typing import Any

import pytest

from chaos.cli import main
from chaos.verify import backoff_run
from chaos.verify.verdict import Verdict


def fake(rows: list[tuple[str, bool | None, str]]) -> Any:
    def check(*_a: Any, **_kw: Any) -> Verdict:
        v = Verdict("backoff compliance")
        for name, ok, why in rows:
            if why:
                v.not_proven(name, 0.02, 0.04, why)
            else:
                v.add(name, 1, 1, ok)
        return v
    return check


@pytest.mark.parametrize("rows, rc, line", [
    ([("min_interval", True, ""), ("jitter", None, "no wider than scheduler noise")], 1,
     "NOT PROVEN: jitter (no wider than scheduler noise)"),
    ([("min_interval", True, ""), ("retry_after", None, "")], 0,
     "PASS: every rule that could be judged holds (n/a: retry_after)"),
    ([("min_interval", False, ""), ("jitter", None, "noise")], 1, "FAIL: min_interval"),
])
def test_unproven_rule_is_not_a_pass(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                     rows: list[tuple[str, bool | None, str]], rc: int, line: str) -> None:
    monkeypatch.setattr(backoff_run, "check_backoff", fake(rows))
    assert main(["backoff-check", "--client-cmd", "x {base_url}"]) == rc
    out = capsys.readouterr().out
    assert line in out and ("PASS" in out) == (rc == 0), out
