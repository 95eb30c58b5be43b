"""The real simulator as a ProcessTarget: TP ranks found, one frozen (state T) and continued; admin faults."""
from __future__ import annotations

import importlib.util
import time

import pytest

from chaos.env import SimulatorOptions
from chaos.env import Target as TargetConfig
from chaos.faults import rank_freeze, sim_fault
from chaos.faults.base import Policy
from chaos.faults.ledger import Ledger
from chaos.targets import admin_token, make_target
from tests._support import free_port


@pytest.fixture
def sim(tmp_path):
    if importlib.util.find_spec("chaos.stack.sim.__main__") is None:
        pytest.skip("simulator (python -m chaos.stack.sim) not present")
    cfg = TargetConfig(name="sim", kind="process", port=free_port(), tp_size=2, rank_ports=[free_port()],
                       simulator=SimulatorOptions(profile="instant", collective_timeout_s=30))
    t = make_target(cfg, run_id="simtest", state_dir=tmp_path)
    try:
        t.start()
        t.wait_healthy(30)
        yield t
    finally:
        t.remove()


def test_rank_freeze_and_admin_fault_on_the_real_simulator(sim, tmp_path):
    policy = Policy(ledger=Ledger(tmp_path / "ledger"), verify_timeout_s=5)
    deadline = time.monotonic() + 10
    while len(sim.rank_pids()) < 2:
        assert time.monotonic() < deadline, sim.rank_pids()
        time.sleep(0.05)
    main, rank1 = sim.rank_pids()
    with rank_freeze(sim, rank=1).using(policy):
        assert sim.proc_state(rank1) == "T" and sim.proc_state(main) != "T"
    assert sim.proc_state(rank1) != "T"
    admin = f"http://127.0.0.1:{sim.port}"
    token = admin_token(tmp_path)  # the file the simulator read its token from
    with sim_fault(admin, token, "slow", factor=3.0).using(policy) as f:
        assert "slow" in f.evidence["active_modes"]
    assert policy.ledger.outstanding() == []
    ledger = policy.ledger.path.read_text()
    assert token.value() not in ledger and token.file in ledger  # the source is recorded, never the token
    assert sim.health()
