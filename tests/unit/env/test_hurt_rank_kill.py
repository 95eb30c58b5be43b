"""The recovery suite's killed TP rank (`nccl-rank-kill`, issue 32): it hurts only targets with a second
rank, says why not in the freeze's words, is not held for the engine's timeout (the plan names no
timeout beside it, the budget waits for none), and its health-truth row names vLLM's known lie."""
from __future__ import annotations

from pathlib import Path

from chaos.env import hurt, parse
from chaos.env.monitoring import RECOVERY_FAULTS
from chaos.experiment import suite_budgets as budgets
from chaos.experiment.suite_plan import RUN, SKIP, plan
from chaos.verify.health_truth import TIMEOUT_BOUND

ENV = """name: two
endpoints: {{api: "http://127.0.0.1:9"}}
targets:
  - {{name: gpu-1, kind: docker, image: vllm/vllm-openai, port: 8000, tp_size: 1}}
  - {{name: gpu-2, kind: docker, image: vllm/vllm-openai, port: 8001, tp_size: {tp},
     vllm: {{model: m, execute_model_timeout_s: 120}}}}
"""


def _env(tp: int = 2):  # type: ignore[no-untyped-def]
    text = ENV.format(tp=tp)
    return parse(text, Path("two.yaml"), {})


def test_a_killed_rank_is_a_recovery_fault_everywhere_the_faults_are_listed() -> None:
    assert "nccl-rank-kill" in hurt.FAULTS and "nccl-rank-kill" in RECOVERY_FAULTS
    assert "nccl-rank-kill" in hurt.TP_ONLY and "nccl-rank-kill" not in hurt.HELD
    assert set(hurt.HELD) == set(TIMEOUT_BOUND)  # held to the engine's timeout: the lies that timeout bounds


def test_only_the_tp2_target_is_hurt_and_a_tp1_one_is_told_why() -> None:
    env = _env()
    assert [t.name for t in hurt.chosen(env, "nccl-rank-kill")[0]] == ["gpu-2"]
    none, why = hurt.chosen(env, "nccl-rank-kill", ["gpu-1"])
    assert none == [] and why == "target gpu-1 runs TP 1: there is no second rank to kill"
    assert hurt.chosen(env, "nccl-rank-freeze", ["gpu-1"])[1] == "target gpu-1 runs TP 1: there is no second rank to freeze"


def test_the_plan_row_names_the_target_and_waits_for_no_timeout() -> None:
    rows = {r.what: r for r in plan(_env(), allow_destructive=False) if r.suite == "recovery"}
    kill = rows["TP rank killed (SIGKILL) on gpu-2 (TP 2)"]
    assert kill.verdict == RUN and kill.target == "gpu-2" and kill.reason == ""
    assert rows["NCCL rank freeze on gpu-2 (TP 2)"].reason.startswith("waits for the engine's timeout")
    only_tp1 = {r.what: r for r in plan(_env(tp=1), allow_destructive=False) if r.suite == "recovery"}
    assert only_tp1["TP rank killed (SIGKILL)"].verdict == SKIP
    assert "no second rank to kill" in only_tp1["TP rank killed (SIGKILL)"].reason


def test_the_budget_waits_for_no_engine_timeout_when_only_the_kill_has_a_target() -> None:
    env = _env()
    env.target("gpu-2").hurt = ["nccl-rank-kill"]  # the freeze, link cut and hang hurt nothing now
    phases = [p.phase for p in budgets.for_suite(env, "recovery").phases]
    assert "wait for the engine to die" not in phases, phases
