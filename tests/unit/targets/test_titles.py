"""Which process is what: vLLM's process titles and the simulator's command lines (chaos.targets.titles)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from chaos.errors import TargetError
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


@pytest.mark.parametrize("cmd", ["python VLLM::Worker_TPx", "grep VLLM::Worker_TP1", "VLLMX-EngineCore"])
def test_lookalikes_are_not_vllm(cmd: str) -> None:
    assert not titles.is_vllm([(5, cmd)])


FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "vllm_titles.json").read_text())
LAYOUTS = FIXTURE["layouts"]


def _procs(name: str) -> list[tuple[int, str]]:
    return [(int(pid), cmd) for pid, cmd in LAYOUTS[name]["procs"]]


def _ranks(key: str) -> dict[str, int]:
    """'dp1_pp0_tp1' -> {'dp': 1, 'pp': 0, 'tp': 1}."""
    return {part[:2]: int(part[2:]) for part in key.split("_")}


@pytest.mark.parametrize("source", [s for s in FIXTURE["sources"] if "example" in s], ids=lambda s: s["title"])
def test_every_title_vllm_sets_is_recognised(source: dict[str, str]) -> None:
    title = titles.parse(source["example"])
    assert title is not None and title.role == source["role"]
    digits = [int(n) for n in re.findall(r"\d+", source["example"])]
    assert [v for v in (title.dp, title.pp, title.tp, title.api, *(n for _, n in title.other)) if v is not None] == digits


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_each_layout_finds_its_workers_and_engines(name: str) -> None:
    layout, procs = LAYOUTS[name], _procs(name)
    main = procs[0][0]
    for key, pid in layout["workers"].items():
        assert titles.select_worker(procs, main, **_ranks(key)) == pid, key
    for key, pid in layout.get("engines", {}).items():
        assert titles.engine_pid(procs, main, dp=_ranks(key)["dp"]) == pid
    if "engine" in layout:
        assert titles.engine_pid(procs, main) == layout["engine"]
    api = {pid for pid, cmd in procs if "APIServer" in cmd or "DPCoordinator" in cmd} | {main}
    assert not api & set(titles.rank_pids(procs, main))  # API servers and the coordinator are never ranks


def test_tp2_measured_rank_1_is_worker_tp1() -> None:
    procs = _procs("tp2")
    assert titles.select_worker(procs, 10, tp=1) == 14
    assert titles.rank_pids(procs, 10) == [13, 14]


def test_a_rank_left_open_in_a_pp_layout_is_refused_not_guessed() -> None:
    with pytest.raises(TargetError, match=r"name pp_rank.*Worker_PP0_TP1"):
        titles.select_worker(_procs("pp2_tp2"), 30, tp=1)
    with pytest.raises(TargetError, match="name dp_rank"):
        titles.engine_pid(_procs("dp2_tp2"), 40)
    with pytest.raises(TargetError, match="no vLLM worker with tp_rank=2"):
        titles.select_worker(_procs("tp2"), 10, tp=2)


def test_workers_still_unnamed_are_refused() -> None:
    """Before its parallel groups exist every worker is `VLLM::Worker` (multiproc_executor.py:1074)."""
    procs = [(1, "vllm serve m"), (2, "VLLM::EngineCore"), (3, "VLLM::Worker"), (4, "VLLM::Worker")]
    with pytest.raises(TargetError, match="titles repeat"):
        titles.select_worker(procs, 1, tp=0)


@pytest.mark.parametrize("unknown", ["VLLM::Frobnicator", "VLLM::Worker_TP1_PP0", "VLLM::EngineCore_TP0",
                                     "VLLM::EngineCoreX", "TEAM::Scheduler"])
def test_unknown_titles_refuse_with_the_titles_seen(unknown: str) -> None:
    procs = [*_procs("custom_prefix"), (99, unknown)]
    with pytest.raises(TargetError, match=f"unknown vLLM process layout: titles {unknown}.*TEAM::Worker_TP1"):
        titles.select_worker(procs, 80, tp=1)
    with pytest.raises(TargetError, match="unknown vLLM process layout"):
        titles.rank_pids(procs, 80)
    with pytest.raises(TargetError, match="unknown vLLM process layout"):
        titles.engine_pid(procs, 80)


def test_simulator_has_tp_ranks_only() -> None:
    assert titles.select_worker(SIM_TP2, 30, tp=1) == 31
    with pytest.raises(TargetError, match="tensor-parallel ranks only"):
        titles.select_worker(SIM_TP2, 30, tp=0, pp=1)


# `docker top` of lab-replica-a on the lab's GPU host, whose dockerd had COLUMNS=80 (the stand-ins lane on two
# xdist workers, 2026-12-05): the engine's ps cut every line at 80 columns, the rank's before `chaos-sim-rank 1`
SIM_TP2_CUT_AT_80 = [(25842, "/sbin/docker-init -- chaos sim --host 10.231"),
                     (25853, "/opt/chaos/bin/python3 /opt/chaos/bin/chaos"),
                     (25854, "/opt/chaos/bin/python3 -m chaos.stack.sim.ra")]


def test_a_rank_worker_cut_before_its_rank_is_never_taken_for_the_simulators_engine() -> None:
    """Freezing "rank 0" would otherwise stop the rank worker and leave the engine running."""
    assert titles.sim_main(SIM_TP2_CUT_AT_80) is None
    assert titles.sim_main([(31, "python -m chaos.stack.sim.")]) is None
    assert titles.sim_main(SIM_TP2) == 30 and titles.rank_pids(SIM_TP2, None) == [30, 31]  # whole lines: as before
