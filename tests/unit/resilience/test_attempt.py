"""Retry-After parsing and URL joining of the attempt layer."""
from __future__ import annotations

import email.utils

import pytest

from chaos.resilience._attempt import Endpoint, parse_retry_after


@pytest.mark.parametrize("value, expected", [("2", 2.0), ("0.2", 0.2), ("-3", 0.0), ("soon", None), ("", None),
                                             (None, None)])
def test_retry_after_seconds(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value) == expected


def test_retry_after_http_date() -> None:
    date = email.utils.formatdate(1_000_010.0, usegmt=True)
    assert parse_retry_after(date, now=1_000_000.0) == pytest.approx(10.0)


@pytest.mark.parametrize("base, path", [("http://h:1", "/v1/chat/completions"), ("http://h:1/v1", "/v1/chat/completions"),
                                        ("http://h:1/c/2/", "/c/2/v1/chat/completions")])
def test_api_path(base: str, path: str) -> None:
    assert Endpoint.parse(base).api_path("/chat/completions") == path
