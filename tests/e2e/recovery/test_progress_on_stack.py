"""The progress-truth scenarios on the embedded stack (a copy of environments/local.yaml on free ports), as a team
runs them: a decode stall is ejected and restarted within slas.health_truth_s, so the checklist item
`progress-truth` is proven under --require-proven; the same stall where only health is watched fails in the
verdict's words (the suite asserts them), and a plain restart passes progress truth."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests._support import require
from tests.e2e.suite_on_stack import checklist_status, run_suite_on_local_copy


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_progress_scenarios_prove_their_item_and_catch_a_stack_that_watches_health_only(tmp_path: Path) -> None:
    require("toxiproxy")
    r = run_suite_on_local_copy(tmp_path, "suites/recovery/test_progress.py")
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "3 passed" in out, out[-4000:]
    assert checklist_status(out, "progress-truth") == "proven", out[-4000:]
