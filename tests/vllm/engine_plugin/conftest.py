from __future__ import annotations

import pytest

from chaos.faults.base import Policy
from chaos.faults.ledger import Ledger


@pytest.fixture
def policy(tmp_path) -> Policy:
    return Policy(ledger=Ledger(tmp_path / "state"), verify_timeout_s=3.0)
