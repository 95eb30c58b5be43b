"""Kill TP rank 1 of replica-b during a burst of 32k prompts: its engine dies, comes back, nothing is lost."""
import pytest

from chaos import accounting_verdict, fault_allowance, fault_happened, rank_kill


@pytest.mark.destructive
def test_rank_kill_during_a_32k_burst(stack, scenario):
    replica, slas = stack.target("replica-b"), stack.env.slas
    sc = scenario("rank-kill", hurt=["replica-b"])
    sc.observe(stack.direct_url("replica-b"))
    sc.start_load(workload="burst", workload_n=5000, users=4, duration_s=120)
    sc.steady_state(2.0)
    sc.inject(kill := rank_kill(replica, rank=1))
    sc.revert()  # waits for the supervisor to restart the engine its rank took down
    sc.wait_recovered(sc.fault_window[1], slas.recovery_s)  # then for a real completion from the new one
    records = sc.stop_load()
    sc.judge("the rank died and took its engine", [fault_happened(kill.evidence, engine_restarted=True)])
    allowed = fault_allowance(records, sc.fault_window, slas.error_budget)  # what the dying engine held
    sc.judge("nothing lost", [accounting_verdict(records, stack.server_log(records=records), failed_max=allowed)])
