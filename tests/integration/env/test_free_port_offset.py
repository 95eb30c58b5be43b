"""The tests' port-offset picker (tests/_support.free_port_offset): free ports, below the ephemeral range."""
from __future__ import annotations

import socket

import pytest

from tests._support import ephemeral_port_low, free_port_offset

TEXT = """endpoints: {api: "http://127.0.0.1:8000"}
targets:
  - {name: a, port: 8101, rank_ports: [8201, 8202]}
"""


def test_every_named_port_moves_to_a_free_one_below_the_ephemeral_range() -> None:
    offset = free_port_offset(TEXT)
    for port in (8000, 8101, 8201, 8202):
        assert port + offset < ephemeral_port_low()
        with socket.socket() as s:
            s.bind(("127.0.0.1", port + offset))  # free: the bind would raise


def test_a_port_that_cannot_move_below_the_ephemeral_range_fails_the_test_with_a_reason() -> None:
    text = f'endpoints: {{api: "http://127.0.0.1:{ephemeral_port_low() - 500}"}}'
    with pytest.raises(pytest.fail.Exception, match="no port offset"):
        free_port_offset(text)
