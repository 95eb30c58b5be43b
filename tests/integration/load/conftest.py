"""Fixtures for load tests: the purpose-built SSE server (no Locust import in the pytest process)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from sse_server import SSEServer  # noqa: E402


@pytest.fixture
def sse_server():
    srv = SSEServer(tokens=4)
    try:
        yield srv
    finally:
        srv.stop()
