"""300 ms added on the link between the clients and the gateway: every request is still answered, and
short prompts stay within their end-to-end SLA plus the delay (the link carries request and answer)."""
from chaos import Experiment, accounting_verdict, fault_proof
from chaos.checks import error_share_below, evaluate, p99_below_s
from chaos.faults import latency


def test_slow_client_link(stack, run_experiment):
    env = stack.env

    def steps(run):
        run.observe(env.endpoints.api)
        run.start_load(duration_s=60.0)
        run.steady_state(2.0)
        delay = latency(stack.toxiproxy, "client", latency=300)
        run.inject(delay)
        run.hold(5.0)
        run.revert()
        records = run.stop_load()
        run.judge("the delay was in place", [fault_proof(delay)])
        limit = env.slas.latency["short"].e2e_p99_s + 2 * 0.3
        during = evaluate(error_share_below(env.slas.error_budget) & p99_below_s(limit, prompt_class="short"),
                          records, name="while the link was slow", window=run.fault_window)
        run.judge("the system behaved", [during, accounting_verdict(records, stack.server_log(records=records))])

    run_experiment(Experiment("slow-client-link", steps=steps))
