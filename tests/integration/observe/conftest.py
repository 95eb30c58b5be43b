"""Observer test fixtures."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_vllm import FakeVllm  # noqa: E402


@pytest.fixture
def fake_vllm():
    f = FakeVllm()
    try:
        yield f
    finally:
        f.stop()
