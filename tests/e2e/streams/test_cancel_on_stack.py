"""The cancellation scenario on the embedded stack (a copy of environments/local.yaml on free ports), as a team
runs it: clients that hang up free the engine, the checklist item `cancel-frees-compute` is proven under
--require-proven, and the gateway with the planted defect that holds the upstream open is caught."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests._support import require
from tests.e2e.suite_on_stack import checklist_status, run_suite_on_local_copy


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_cancel_scenario_proves_its_item_and_catches_a_gateway_that_holds_the_upstream(tmp_path: Path) -> None:
    require("toxiproxy")
    r = run_suite_on_local_copy(tmp_path, "suites/streams/test_cancel.py")
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "2 passed" in out, out[-4000:]
    assert checklist_status(out, "cancel-frees-compute") == "proven", out[-4000:]
    assert "cancel=ok" in out and "cancel_held_caught=yes" in out, out[-4000:]
