"""Which process is what: vLLM's process titles and the simulator's command lines (chaos.targets.titles)."""
from __future__ import annotations

import pytest

from chaos.targets import titles

VLLM_TP2 = [(10, "/venv/bin/python /tools/vllm serve model --port 8000"), (11, "VLLM::EngineCore"),
            (12, "python -B -c from multiprocessing.resource_tracker import main;main(32)"),
            (14, "VLLM::Worker_TP1"), (13, "VLLM::Worker_TP0")]
VLLM_TP1 = [(20, "/venv/bin/python /tools/vllm serve model"), (21, "VLLM::EngineCore"), (22, "VLLM::Worker")]
SIM_TP2 = [(30, "python -m chaos.stack.sim --port 18201 --tensor-parallel-size 2"),
           (31, "python -m chaos.stack.sim.rank chaos-sim-rank --rank 1 --port 18301")]


def test_vllm_ranks_are_the_workers_not_the_api_server() -> None:
    assert titles.rank_pids(VLLM_TP2, 10) == [13, 14]  # rank 1 is Worker_TP1, whatever the listing order
    assert titles.engine_pid(VLLM_TP2, 10) == 11


def test_a_tp1_worker_has_no_number_and_is_rank_0() -> None:
    assert titles.rank_pids(VLLM_TP1, 20) == [22]
    assert titles.engine_pid(VLLM_TP1, 20) == 21


def test_older_vllm_worker_names() -> None:
    assert titles.rank_pids([(1, "vllm serve"), (2, "VllmWorker-1"), (3, "VllmWorker-0")], 1) == [3, 2]


def test_simulator_rank_0_is_the_engine_main_process() -> None:
    assert titles.rank_pids(SIM_TP2, 30) == [30, 31]
    assert titles.engine_pid(SIM_TP2, 30) == 30
    assert titles.rank_pids(SIM_TP2, None) == [30, 31]  # in a container: the main is found by its command


@pytest.mark.parametrize("cmd", ["VLLM::EngineCoreX", "python VLLM::Worker_TPx", "grep VLLM::Worker_TP1"])
def test_lookalikes_are_not_vllm(cmd: str) -> None:
    assert not titles.is_vllm([(5, cmd)])
