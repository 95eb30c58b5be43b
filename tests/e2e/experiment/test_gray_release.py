"""`examples/gameday/gray-release.yaml` on the embedded stack: the three stages run, each gated; with
an answer difference planted in the canary (the simulator's answer-drift on 20 % of its answers) the
shadow gate fails on the diff score, the stage is rolled back, and stage 2 never starts."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support import FIXED_OFFSETS, REPO
from tests.e2e.experiment.test_gameday import _components, _events, _finish, _journal  # noqa: F401 - fixture

OFFSET = str(FIXED_OFFSETS["gray-release"])  # ports and state of its own
PLAN = REPO / "examples" / "gameday" / "gray-release.yaml"


def _env_dir(tmp_path: Path, drift: float | None) -> Path:
    """environments/local.yaml as `local-gray`, the canary (replica-c) planted with answer-drift."""
    text = (REPO / "environments" / "local.yaml").read_text()
    text = text.replace("name: local\n", "name: local-gray\n").replace("state_dir: ../.state/local\n",
                                                                       f"state_dir: {tmp_path / 'state'}\n")
    # the rule files are relative to the environment file, and the copy lives in tmp_path
    text = text.replace("rule_files: [../examples/", f"rule_files: [{REPO / 'examples'}/")
    if drift is not None:
        head, canary = text.split("  - name: replica-c\n")
        canary = re.sub(r"simulator: \{(.*?)\}", rf'simulator: {{\1, extra_args: ["--fault", "answer-drift:{drift}"]}}',
                        canary, count=1)
        text = head + "  - name: replica-c\n" + canary
    d = tmp_path / "environments"
    d.mkdir()
    (d / "local-gray.yaml").write_text(text)
    return d


def _run(tmp_path: Path, drift: float | None) -> tuple[subprocess.Popen, str, Path, dict]:
    env = {**os.environ, "CHAOS_PORT_OFFSET": OFFSET, "CHAOS_ENV_DIR": str(_env_dir(tmp_path, drift))}
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-m", "chaos.cli", "gameday", "--env", "local-gray", "--plan", str(PLAN),
                          "--out", str(out), "--no-live"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    return p, _finish(p, 600), out, env


def _ended(out: Path) -> dict[str, str]:
    return {e["experiment"]: e["status"] for e in _events(out, "ExperimentEnded")}


def _why(out: Path, text: str) -> str:
    """The failed gate rows first (the output's tail is cut short in CI), then the output's tail."""
    failed = [f"{e['experiment']}: {e['name']}: {f}" for e in _events(out, "VerdictReached") for f in e["failures"]]
    return "\n".join(failed) + "\n" + text[-3000:]


@pytest.mark.slow
@pytest.mark.timeout(700)
def test_the_gray_release_runs_its_three_stages(tmp_path):
    p, text, out, _ = _run(tmp_path, None)
    ended = _ended(out)
    assert list(ended.values()) == ["PASSED"] * 3 and p.returncode == 0, (ended, _why(out, text))
    verdicts = [(e["experiment"], e["name"], e["ok"]) for e in _events(out, "VerdictReached")]
    # beside each gate, the environment's monitoring row (the stages expect no alert: shown, unjudged)
    gates = [v for v in verdicts if not v[1].startswith("monitoring: ")]
    assert [g[1] for g in gates] == ["gray release: shadow gate"] + ["gray release: live gate"] * 2, verdicts
    assert all(ok for _, _, ok in gates), gates
    assert [e["ok"] for e in _events(out, "FaultReverted")] == [True] * 3  # each stage put the release back


@pytest.mark.slow
@pytest.mark.timeout(700)
def test_a_planted_answer_difference_fails_the_shadow_gate_and_stage_two_never_starts(tmp_path):
    p, text, out, _ = _run(tmp_path, 0.2)
    ended = _ended(out)
    stages = [x for x in ended]
    assert ended[stages[0]] == "FAILED" and all(ended[s] == "NOT STARTED" for s in stages[1:]), (ended, text[-4000:])
    assert p.returncode == 1, text[-3000:]
    gate = [e for e in _events(out, "VerdictReached") if e["name"] == "gray release: shadow gate"][0]
    assert not gate["ok"] and any(f.startswith("response diff score") for f in gate["failures"]), gate
    assert not any(e["experiment"] == stages[1] for e in _events(out, "PhaseStarted"))
    why = [e for e in _events(out, "ExperimentEnded") if e["status"] == "NOT STARTED"][0]["reason"]
    assert "failed its gate (rolled back)" in why
    assert [e["ok"] for e in _events(out, "FaultReverted")] == [True]  # the shadow stage was rolled back
    assert _journal(out)["events"]
