"""300 ms added on the link between the clients and the gateway: every request is still answered, and
short prompts stay within their end-to-end SLA plus the delay (the link carries request and answer)."""
from chaos import accounting_verdict, evaluate, fault_proof, latency
from chaos.checks import error_share_below, p99_below_s


def test_slow_client_link(stack, scenario):
    env = stack.env
    sc = scenario("slow-client-link")
    sc.observe(env.endpoints.api)
    sc.start_load(duration_s=60.0)
    sc.steady_state(2.0)
    delay = latency(stack.toxiproxy, "client", latency=300)
    sc.inject(delay)
    sc.hold(5.0)
    sc.revert()
    records = sc.stop_load()
    sc.judge("the delay was in place", [fault_proof(delay)])
    limit = env.slas.latency["short"].e2e_p99_s + 2 * 0.3
    during = evaluate(error_share_below(env.slas.error_budget) & p99_below_s(limit, prompt_class="short"),
                      records, name="while the link was slow", window=sc.fault_window)
    sc.judge("the system behaved", [during, accounting_verdict(records, stack.server_log(records=records))])
