"""The load suite and `chaos baseline` on the embedded stack (copies of environments/local.yaml on free
ports): a clean run with no baseline judges everything else and skips the regression check with the
command that records one; `chaos baseline record` writes it and the clean run then passes; 2 % of
attempts failing (retried, so every user got an answer) FAILS the load verdict on the P99 misses; and
`chaos baseline diff` against a slower profile fails its latency rows and names the classes that
regressed."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests._support import REPO, require
from tests.standins.stack.stack_env import write_env


def _variant(tmp_path: Path, label: str, fault: str | None, baseline: Path) -> Path:
    d = tmp_path / label
    d.mkdir()
    doc = yaml.safe_load(write_env(d).read_text())
    doc["load"]["duration_s"] = 40  # the suite's mix runs 2 x 40 x time_scale 0.1 = 8 s
    doc["baseline_file"] = str(baseline)
    for t in doc["targets"]:
        if fault:
            t["simulator"]["extra_args"] = ["--fault", fault]
    path = d / f"{label}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _run(*args: str, timeout: int = 400) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CHAOS_REQUIRE"}  # a skip inside is an outcome here
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


def _suite(env_file: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return _run("-m", "pytest", "suites/load", "-k", "mix", "--env", str(env_file), "-p", "no:cacheprovider", "-rs",
                "-q", *extra)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_load_verdicts_and_baselines_on_the_embedded_stack(tmp_path):
    require("toxiproxy")
    baseline = tmp_path / "baseline.json"
    recorded = tmp_path / "baseline-mix-7-2-1.json"  # the file the environment's baseline_file names for the mix
    clean = _variant(tmp_path, "clean", None, baseline)

    first = _suite(clean)
    out = first.stdout + first.stderr
    assert first.returncode == 0 and "1 skipped" in out, out[-3000:]
    assert "run `chaos baseline record --env" in out and "--workload mix-7-2-1` and commit the file" in out, out[-3000:]

    rec = _run("-m", "chaos.cli", "baseline", "record", "--env", str(clean), "--tolerance-rel", "1.0",
               "--tolerance-abs-ms", "50")
    assert rec.returncode == 0 and recorded.exists(), rec.stdout[-2000:] + rec.stderr[-2000:]
    doc = json.loads(recorded.read_text())
    assert doc["version"] == 2 and set(doc["classes"]) == {"short", "long", "xl"}, doc
    assert doc["gpu"]["visible"] is False and doc["gpu"]["why"].startswith("no GPU visible")

    # with its baseline the clean run proves its items: the release checklist's guard passes on local's list
    again = _suite(clean, "--require-proven")
    assert again.returncode == 0 and "1 passed" in again.stdout, (again.stdout + again.stderr)[-3000:]

    failing = _suite(_variant(tmp_path, "errors", "error-rate:fraction=0.02", baseline))
    out = failing.stdout + failing.stderr
    assert failing.returncode == 1 and "1 failed" in out, out[-3000:]
    assert "e2e_p99" in out and "attempts failed" in out, out[-3000:]  # the misses, not the users' error rate

    slow = _variant(tmp_path, "slow", "slow:factor=200", baseline)
    diff = _run("-m", "chaos.cli", "baseline", "diff", str(recorded), "--env", str(slow), "--duration", "20")
    out = diff.stdout + diff.stderr
    assert diff.returncode == 1, out[-3000:]
    regressed = next(line for line in out.splitlines() if line.startswith("regressed:"))
    assert "short" in regressed and "long" in regressed, out[-3000:]
    assert "short.e2e_p99 " in out.replace("│", " ") and "FAIL" in out, out[-3000:]
