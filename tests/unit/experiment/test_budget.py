"""A scenario's time budget on a fake clock: a phase past its budget fails naming it, its budget and the
figure it came from; the scenario past the sum fails naming the phase that was running; a phase that
returns late fails all the same; the fault is reverted on the way out; and the figures derived from
the environments (local at 0.1x, staging at real time) are the ones the suites' own waits need."""
from __future__ import annotations

import pytest

from chaos.env import load
from chaos.experiment import events as ev
from chaos.experiment import suite_budgets as budgets
from chaos.experiment.budget import Budget, BudgetExceeded, PhaseBudget
from chaos.experiment.run import Run

STAGING = {"STAGING_API_KEY": "k", "HF_TOKEN": "t"}


class Fault:
    """Stands in for a fault: counts its injects and reverts."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def inject(self) -> dict:
        self.log.append("inject")
        return {}

    def revert(self, check: bool = True) -> None:
        self.log.append(f"revert check={check}")


def _scenario(tmp_path, budget: Budget, env: str = "local"):
    now = [1000.0]
    sc = Run(load(env, environ=STAGING), "budget", tmp_path, clock=lambda: now[0],
                  sleep=lambda s: now.__setitem__(0, now[0] + s), budget=budget)
    return sc, now


def test_a_phase_past_its_budget_fails_naming_it_and_the_fault_is_reverted(tmp_path):
    sc, now = _scenario(tmp_path, Budget([PhaseBudget("hold fault", 10.0, "test figure 7 + margin")]))
    fault = Fault()
    sc.inject(fault)
    with pytest.raises(BudgetExceeded) as caught:
        sc.hold(100.0)
    msg = str(caught.value)
    assert msg.startswith("scenario budget: phase 'hold fault' ran 10.") and "\n" not in msg, msg
    assert msg.endswith("s, its budget 10.0 s (test figure 7 + margin)"), msg
    assert caught.value.phase == "hold fault" and 10.0 < caught.value.elapsed_s < 10.3
    assert now[0] < 1010.3  # it ended at the budget, not at the hold's 100 s
    sc.close("FAILED", msg)  # the fixture's teardown: the watchdog is spent, the revert runs
    assert fault.log == ["inject", "revert check=True"]
    ended = [e for e in sc.bus.events if isinstance(e, ev.PhaseEnded) and e.phase == "hold fault"]
    assert ended and not ended[0].ok and ended[0].error == msg and ended[0].status == "failed"


def test_the_recovery_wait_is_held_to_its_derived_budget(tmp_path):
    env = load("local", environ={})
    budget = budgets.for_suite(env, "recovery")
    sc, now = _scenario(tmp_path, budget)
    b = budget.get("recover")
    assert b is not None and b.seconds == 2 * env.slas.recovery_s + 30 and b.why == "2 x slas.recovery_s 20 + margin"
    with pytest.raises(BudgetExceeded, match=r"^scenario budget: phase 'recover' ran 70\.\d s, its budget 70\.0 s "
                                             r"\(2 x slas\.recovery_s 20 \+ margin\)$"):
        sc.wait_recovered(now[0], timeout=10_000)  # a wait longer than its SLA allows: the budget ends it


def test_a_phase_that_returns_late_fails_all_the_same(tmp_path):
    sc, now = _scenario(tmp_path, Budget([PhaseBudget("drain load", 50.0, "2 x load.duration_s + grace + margin")]))
    with pytest.raises(BudgetExceeded, match=r"phase 'drain load' ran 80\.0 s, its budget 50\.0 s"):
        with sc.phase("drain load"):
            now[0] += 80.0  # a blocking call (the load's own wait) that came back late


def test_the_scenario_past_the_sum_fails_naming_the_phase_that_was_running(tmp_path):
    sc, now = _scenario(tmp_path, Budget([PhaseBudget("steady state", 20.0, "a"), PhaseBudget("verify", 20.0, "b")]))
    sc.wait(15.0, "steady state")
    with pytest.raises(BudgetExceeded) as caught:
        sc.wait(100.0, "canary must stay out")  # a phase the budget does not name: only the sum holds it
    assert str(caught.value).startswith("scenario budget: the scenario ran 40.")
    assert str(caught.value).endswith("its budget 40.0 s (the sum of its phases' budgets); "
                                      "phase 'canary must stay out' was running")
    sc.wait(100.0, "after it fired")  # fired once: the rest of the way out is not cut short
    assert now[0] > 1140.0


def test_within_budget_nothing_fires_and_prefixed_phases_share_one(tmp_path):
    sc, now = _scenario(tmp_path, Budget([PhaseBudget("verify", 5.0, "judging")]))
    sc.judge("the system behaved", [])
    with pytest.raises(BudgetExceeded, match="phase 'verify: the fault really happened' ran 6"):
        with sc.phase("verify: the fault really happened"):
            now[0] += 6.0


def test_real_time_budgets_cover_what_the_suites_wait_for():
    """staging.example at time_scale 1.0: the load suite's 1200 s of load and the rank freeze's wait on
    vLLM's 300 s execute-model timeout fit their budgets, and the per-test ceiling sits above the sum."""
    env = load("staging.example", environ=STAGING)
    rec, ld = budgets.for_suite(env, "recovery"), budgets.for_suite(env, "load")
    die = rec.get("wait for the engine to die")
    assert die is not None and die.seconds >= 315 and "vLLM's default execute-model timeout 300" in die.why
    run = ld.get("run load")
    assert run is not None and run.seconds >= 2 * env.load.duration_s * env.time_scale + 30
    assert rec.get("recover").seconds >= 2 * env.slas.recovery_s  # type: ignore[union-attr]
    for suite, b in (("recovery", rec), ("load", ld), (None, budgets.for_suite(env, None))):
        ceiling = budgets.item_ceiling_s(env, suite)
        assert ceiling > b.total + env.slas.cold_start_s and ceiling > 600, (suite, ceiling, b.total)


def test_a_vllm_target_names_its_own_execute_model_timeout():
    env = load("staging.example", environ=STAGING)
    cfg = env.targets[0].model_copy(update={"vllm": env.targets[0].vllm.model_copy(  # type: ignore[union-attr]
        update={"execute_model_timeout_s": 120.0})})
    assert budgets.engine_timeout(cfg) == (120.0, "gpu-1's vllm.execute_model_timeout_s 120")
    sim = load("local", environ={}).targets[0]
    assert budgets.engine_timeout(sim) == (3.0, "replica-a's simulator collective_timeout_s 3")


def test_the_wait_for_a_vllm_engine_death_adds_its_engine_teardown_as_the_target_sets_it():
    # vLLM joins its ENGINE_CORE_DEAD send up to 5 s, waits VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS for its workers,
    # then 4 s after SIGTERM, before the engine core is gone
    env = load("staging.example", environ=STAGING)
    cfg = env.targets[0].model_copy(update={"vllm": env.targets[0].vllm.model_copy(  # type: ignore[union-attr]
        update={"execute_model_timeout_s": 120.0})})
    assert budgets.engine_death_wait(cfg) == (120.0 + 5 + 5 + 4 + 15, "gpu-1's vllm.execute_model_timeout_s 120 + 14 s "
                                                                       "of vLLM's engine teardown + 15 s")
    slow = cfg.model_copy(update={"env": {**cfg.env, "VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS": "30"}})
    assert budgets.engine_death_wait(slow)[0] == 120.0 + 5 + 30 + 4 + 15
    sim = load("local", environ={}).targets[0]
    assert budgets.engine_death_wait(sim) == (3.0 + 15, "replica-a's simulator collective_timeout_s 3 + 15 s")


def test_the_replicas_restart_after_its_engine_died_is_budgeted_by_its_recovery_sla():
    # the SIGKILLed frozen rank's teardown holds the container's exit (18 s measured): no vLLM figure bounds it
    env = load("local", environ={})
    assert budgets.restart_after_engine_death(env) == (env.slas.recovery_s, f"slas.recovery_s {env.slas.recovery_s:g}")
    rec = budgets.for_suite(env, "recovery")
    names = [p.phase for p in rec.phases]
    assert names.index("wait for the replica's restart") == names.index("wait for the engine to die") + 1
    assert rec.get("wait for the replica's restart").seconds >= env.slas.recovery_s  # type: ignore[union-attr]


def test_suite_of_a_test_path():
    assert budgets.suite_of(("/", "r", "suites", "recovery", "test_recovery.py")) == "recovery"
    assert budgets.suite_of(("/", "r", "tests", "experiment", "test_budget.py")) is None
    assert budgets.suite_of(("/", "r", "suites", "test_top.py")) is None


def test_a_wait_with_its_own_bound_is_held_to_that_not_to_its_prefix_s(tmp_path):
    """The golden answers' wait in a suite whose budget does not name it (a team's own): its own bound, not
    the 3 s pre-fault check's budget its name begins with."""
    from chaos.experiment.answers_steps import PHASE, collect_golden

    sc, now = _scenario(tmp_path, Budget([PhaseBudget("steady state", 33.0, "the 3 s pre-fault check + margin"),
                                          PhaseBudget("verify", 600.0, "judging")]))
    sc.load = type("Load", (), {"records": staticmethod(lambda: [])})()
    assert collect_golden(sc, timeout_s=240.0) == 0  # waited its 240 s out: no BudgetExceeded at 33 s
    assert now[0] >= 1240.0
    with pytest.raises(BudgetExceeded, match=rf"phase '{PHASE}' ran 300\.0 s, its budget 270\.0 s \(its wait"):
        with sc.phase(PHASE, budget=PhaseBudget(PHASE, 270.0, "its wait for answers 240 s + margin")):
            now[0] += 300.0
