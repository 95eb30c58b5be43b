"""Kill TP rank 1 of replica-b during a burst of 32k prompts: its engine dies, comes back, nothing is lost."""
import pytest

from chaos import Experiment, accounting_verdict, fault_happened
from chaos.faults import rank_kill
from chaos.verify.accounting import fault_allowance


@pytest.mark.destructive
def test_rank_kill_during_a_32k_burst(stack, run_experiment):
    replica, slas = stack.target("replica-b"), stack.env.slas

    def steps(run):
        run.observe(stack.direct_url("replica-b"))
        run.start_load(workload="burst", workload_n=5000, users=4, duration_s=120)
        run.steady_state(2.0)
        run.inject(kill := rank_kill(replica, rank=1))
        run.revert()  # waits for the supervisor to restart the engine its rank took down
        run.wait_recovered(run.fault_window[1], slas.recovery_s)  # then for a real completion from the new one
        records = run.stop_load()
        run.judge("the rank died and took its engine", [fault_happened(kill.evidence, engine_restarted=True)])
        allowed = fault_allowance(records, run.fault_window, slas.error_budget)  # what the dying engine held
        run.judge("nothing lost", [accounting_verdict(records, stack.server_log(records=records), failed_max=allowed)])

    run_experiment(Experiment("rank-kill", steps=steps, hurt=["replica-b"]))
