"""Progress truth as an Experiment (`progress_run(...)`): a fault on one replica under load, and the verdict is
whether its /health said 200 while it decoded nothing for the requests it held, longer than
`slas.health_truth_s` (chaos.verify.progress_truth), from its own counters scraped over the run and the fault
proxy's log of its streams' pauses.

The suite names the fault: a decode stall on a stack that acts on progress (the reference gateway ejects the
replica, the embedded stack restarts it: chaos.bridge.progress_keeper) passes; the same stall with the gateway
told to watch health only (chaos.faults.gateway.health_only), held past the SLA, is the negative control and
fails, naming the seconds; a plain restart stops decode only while no process answers /health, and passes."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from chaos.experiment.runner import Experiment
from chaos.experiment.suite import fault_happened
from chaos.experiment.waits import engine_restarted
from chaos.observe.metrics import engine_counter_scraper
from chaos.report import allure as rep
from chaos.verify.progress_truth import progress_truth_rows
from chaos.verify.stream_progress import DecodingStream, decoding_streams
from chaos.verify.verdict import Verdict

if TYPE_CHECKING:
    from chaos.experiment.run import Run
    from chaos.experiment.running_stack import RunningStack as StackHandle
    from chaos.faults import Fault

SCRAPE_EVERY_S = 0.5  # the replica's counters: ten reads inside the local SLA (health_truth_s 5)
STREAM_MARGIN_S = 120.0  # a stream decoding at a window's start arrived before it: read the log from this far back
# the other replicas: their claims and counters stale after 2 s and 3 s (chaos.verify.progress_truth), so a stall of
# theirs longer than the SLA is seen at either rate, at a fraction of the hurt replica's probes' cost
PEER_HEALTH_EVERY_S, PEER_SCRAPE_EVERY_S = 0.5, 1.0
PEER_HEALTH = "replica-health"  # not a claim health truth pairs with completions (chaos.verify.health_truth.CLAIMS)


def watch_peers(run: Run, stack: StackHandle, hurt: str) -> dict[str, str]:
    """Every replica but `hurt`: its /health (source `replica-health:<name>`) and engine counters, for progress truth
    over the whole run (a fault on one replica must not stall the others' decode, and while it is out they carry
    its load). Returns {replica: its /health source}."""
    sources: dict[str, str] = {}
    for t in stack.env.targets:
        if t.name == hurt:
            continue
        url = stack.direct_url(t.name)
        sources[t.name] = run.observe_health(url, f"{PEER_HEALTH}:{t.name}", every_s=PEER_HEALTH_EVERY_S)
        run.add_observer(engine_counter_scraper(url, run.timeline, t.name, interval_s=PEER_SCRAPE_EVERY_S).start())
    return sources


def proxy_streams(stack: StackHandle, names: Iterable[str], since: float, until: float
                  ) -> dict[str, list[DecodingStream] | str | None] | None:
    """Progress truth's second source for each target in `names` that a fault proxy stands in front of: its
    streams' pauses over [since, until] (a str: why the log could not be read); None where no fault proxy stands
    in front of any."""
    fronted = [n for n in names if stack.env.fault_proxy_of(n) is not None]
    if not fronted:
        return None
    log = stack.server_log("fault proxy", since=since - STREAM_MARGIN_S, until=until)
    if log.unproven:
        return {n: f"the fault proxy's log could not be read ({log.unproven})" for n in fronted}
    return {n: decoding_streams(log.rows, n) for n in fronted}


def progress_run(stack: StackHandle, kind: str, name: str, fault: Callable[[], Fault], *, restarted: bool = True,
                 hold_s: float | None = None) -> Experiment:
    """`fault()` (called `kind`) on target `name` under the environment's load, judged by progress truth.

    `restarted`: the stack is expected to act on the fault: the run waits up to twice slas.health_truth_s for the
    replica's restart (stage 1 proves one it saw). A stack that does not act by then has let /health lie past the
    SLA, and progress truth fails it in its own words; a stack that said unhealthy instead passes without a
    restart. Else the fault is held `hold_s` (default twice the SLA) and reverted: the negative control."""
    env = stack.env
    rep.labels(epic="Resilience", feature="Progress truth", story=kind, suite="recovery")
    rep.title(f"{kind} on {name}")

    def steps(run: Run) -> None:
        url = stack.direct_url(name)
        run.observe(url)  # the hurt replica's /health, /v1/models and completions (sources without a suffix)
        run.add_observer(engine_counter_scraper(url, run.timeline, name, interval_s=SCRAPE_EVERY_S).start())
        peers = watch_peers(run, stack, name)
        target = stack.target(name)
        before = target.restart_count()
        run.start_load(duration_s=4 * env.slas.health_truth_s + 2 * env.slas.recovery_s + 30)  # stopped when judged
        run.steady_state(2.0)
        t_inject = run.clock()
        evidence: dict[str, Any] = dict(run.inject(fault()) or {})
        limit = env.slas.health_truth_s
        if restarted:
            with run.phase("wait for the stack to restart the replica"):
                run.wait_until(engine_restarted(target, before=before), 2 * limit, every=0.1)
        else:
            run.hold(hold_s if hold_s is not None else 2 * limit)
        evidence["restarts_seen"] = target.restart_count() - before
        if evidence["restarts_seen"]:  # its new process never had the fault: undone once it answers again
            run.wait_recovered(run.clock(), env.slas.recovery_s * 2)
            run.revert(check=False)
        else:
            run.revert()
            run.wait_recovered(run.clock(), env.slas.recovery_s * 2)
        run.wait(4 * SCRAPE_EVERY_S)  # scrapes of the replica decoding again after it
        run.stop_load()
        if restarted and evidence["restarts_seen"]:
            run.judge("the fault really happened", [fault_happened(evidence, restarts_seen=lambda n: n >= 1)])
        v = Verdict("progress truth", window=(t_inject, run.clock()))
        streams = proxy_streams(stack, [name, *peers], t_inject, run.clock())
        progress_truth_rows(v, run.timeline, t_inject, limit, {name: "health", **peers}, fault=kind, streams=streams)
        run.judge("decode made progress whenever /health said 200", [v])

    return Experiment(f"progress-{kind}-{name}", steps=steps, hurt=(name,))
