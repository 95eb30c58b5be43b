"""The slow-but-healthy control of detection across signals (`detection_control(...)`), whose steps are: the
environment's users at its peak, every one asking the longest prompt classes (long prefills, no fault), the hurt
replica watched by every signal a recovery run watches; then each signal's false alarms go into the summary
(section "detection", read by every recovery scenario's detection table) and the verdicts: the work was healthy
(nothing lost beyond the error budget: else its alarms were true ones), and the engine's named execute-model
timeout would not kill it (the heartbeat's longest gap stays under it)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from chaos.experiment import suite_budgets as budgets
from chaos.experiment.runner import Experiment
from chaos.observe.metrics import engine_counter_scraper
from chaos.report import allure as rep
from chaos.report.tables import Table
from chaos.verify.accounting import accounting_verdict, fault_allowance
from chaos.verify.detection import (
    ALERT,
    LIVENESS,
    Alarms,
    Signal,
    alert_alarms,
    control_keys,
    false_alarms,
    first_bad,
    observations,
    signals,
)
from chaos.verify.liveness import PHASES, Replay, answers, replay
from chaos.verify.verdict import Verdict

if TYPE_CHECKING:
    from chaos.experiment.run import Run
    from chaos.experiment.running_stack import RunningStack as StackHandle
    from chaos.report.summary import SummaryCollector
    from chaos.verify.alert_watch import AlertMonitor, AlertWatch

SECTION = "detection"
# the control's length at least, whatever the time scale: its false alarms are counted over this much slow work
CONTROL_MIN_S = 20.0


def long_prompt_mix(classes: dict[str, int]) -> dict[str, float]:
    """The longest two prompt classes of the environment, equally: the slowest prefills its replicas are sized for."""
    longest = sorted(classes, key=lambda c: classes[c])[-2:]
    return {c: 1.0 for c in longest}


def control_alarms(summary: SummaryCollector, replica: str) -> dict[str, Alarms] | None:
    """The control's false alarms per signal key, from the summary; None where no control ran this session."""
    got = summary.suites().get(SECTION)
    if not got or "control_s" not in got:
        return None
    out: dict[str, Alarms] = {}
    for s in [*signals(replica), ALERT, LIVENESS]:
        count, longest, observed = control_keys(s)
        if count in got:
            out[s.key] = Alarms(int(got[count]), float(got.get(longest, 0.0)), int(got.get(observed, 0)))
    return out


def detection_control(stack: StackHandle, summary: SummaryCollector, name: str,
                      monitoring: AlertMonitor | None = None) -> Experiment:
    """The slow-but-healthy control on target `name`, as an Experiment for the one runner; `monitoring`: the team's
    alerts, whose firings in the control are its false alarms (where Prometheus is read)."""
    env = stack.env
    rep.labels(epic="Resilience", feature="Detection across signals", story="slow-but-healthy control",
               suite="recovery")
    rep.title(f"slow-but-healthy control on {name}: long prefills at the load's peak, no fault")

    def steps(run: Run) -> None:
        url = stack.direct_url(name)
        run.observe(url)
        run.observe(env.endpoints.api, source="api")
        run.add_observer(engine_counter_scraper(url, run.timeline, name).start())  # the heartbeat
        run.observe_liveness(url)
        mix = long_prompt_mix(env.load.classes)
        probe = env.liveness  # long enough for each of its phases to fail as often as restarts the replica
        control_s = max(CONTROL_MIN_S, run.scaled(60), (probe.failure_threshold + 1) * probe.period_s if probe else 0.0)
        with run.phase("start load", mix=", ".join(mix), users=env.load.users):
            run.start_load(duration_s=control_s + 40, mix=mix, users=env.load.users)
        run.steady_state(2.0)
        watch = monitoring.watch(None) if monitoring is not None else None
        a = run.clock()
        run.wait(control_s, "no fault: long prefills at the load's peak, every signal watched")
        b = run.clock()
        records = run.stop_load()
        stack.attribute_replicas(records)
        summary.set(SECTION, control_s=round(b - a, 1))
        longest_gap, beats = 0.0, 0
        for s in signals(name):
            alarms = false_alarms(observations(run.timeline, s), a, b)
            count, longest, observed = control_keys(s)
            summary.add(SECTION, **{count: alarms.count, observed: alarms.observed})
            summary.worst(SECTION, longest, alarms.longest_s)
            rep.attach_text(f"{s.label}: {alarms.count} false alarm(s) in {alarms.observed} observations, the "
                            f"longest {alarms.longest_s:.2f} s", f"false alarms: {s.label}")
            if s.key == "heartbeat":
                longest_gap, beats = alarms.longest_s, alarms.observed
        _alert_alarms(summary, watch, a, b, monitoring.step_s if monitoring is not None else 1.0)
        av = accounting_verdict(records, stack.server_log(records=records),
                                failed_max=fault_allowance(records, None, env.slas.error_budget))
        timeout, said = budgets.engine_timeout(env.target(name))
        v = Verdict("named timeouts against slow-but-healthy work", window=(a, b))
        if beats < 2:
            v.not_proven("heartbeat_longest_gap_s", timeout, None, f"{name}'s engine counters were not read: how long "
                         "its slow work goes without a decode step is unknown")
        else:
            v.add("heartbeat_longest_gap_s", timeout, longest_gap, longest_gap < timeout,
                  f"the longest the engine went without decoding while it held requests, under long prefills; "
                  f"{said} must be longer, or it kills slow work")
        _liveness_row(v, run, summary, a, b)
        run.judge("the control was healthy, and its named timeouts would not kill it", [av, v])

    return Experiment(f"detection-control-{name}", steps=steps, hurt=())


def _liveness_row(v: Verdict, run: Run, summary: SummaryCollector, a: float, b: float) -> None:
    """The team's liveness probe over the control, replayed at every phase: it must restart the slow but healthy
    replica at none (`liveness_probe_restarts`); nothing where the environment declares no probe."""
    probe = run.env.liveness
    if probe is None:
        return
    got = [x for x in answers(run.timeline) if a <= x.t <= b]
    if len(got) < 2:
        v.not_proven("liveness_probe_restarts", 0, None, f"the team's liveness probe ({probe.describe()}): its path "
                     "was not probed in the control: whether it would kill slow work is unknown")
        return
    rp = replay(got, probe, a, b)
    slowest = max(x.known - x.t for x in got)
    count, _, observed = control_keys(LIVENESS)  # a replayed probe has restarts, not false stretches
    summary.add(SECTION, **{count: rp.killed, observed: PHASES})
    v.add("liveness_probe_restarts", 0, rp.killed, rp.killed == 0,
          f"the team's liveness probe ({probe.describe()}) replayed at {PHASES} phases over {len(got)} probes of "
          f"{probe.path}: it would have restarted this slow but healthy replica at {rp.killed} of them; the slowest "
          f"answer took {slowest:.2f} s")


def _alert_alarms(summary: SummaryCollector, watch: AlertWatch | None, a: float, b: float, step_s: float) -> None:
    """The team's alerts that began to fire in the control, as the alert signal's false alarms (not watched where
    no Prometheus was read)."""
    firings = watch.started_between(a, b) if watch is not None else None
    if firings is None:
        return
    alarms = alert_alarms([(f.start, f.end) for f in firings], a, b, step_s)
    count, longest, observed = control_keys(ALERT)
    summary.add(SECTION, **{count: alarms.count, observed: alarms.observed})
    summary.worst(SECTION, longest, alarms.longest_s)
    names = ", ".join(sorted({f.alertname for f in firings})) or "none"
    rep.attach_text(f"{ALERT.label}: {alarms.count} firing(s) began in the control ({names}), the longest "
                    f"{alarms.longest_s:.2f} s", f"false alarms: {ALERT.label}")


def attach_detection(run: Run, summary: SummaryCollector, fault: str, replica: str, t0: float,
                     alert_s: float | None, alerts_read: bool) -> Replay | None:
    """A recovery scenario's detection table, attached to its report: each signal's seconds from the fault at
    `t0` to its first bad observation (the alert's `alert_s`, where `alerts_read`), beside the control's false
    alarms; the detections go into the run's timeline as one event. Returns the team's liveness probe replayed
    from `t0` (None where the environment declares none or its path was not probed), for its catch verdict."""
    until = run.clock()
    sigs = signals(replica)
    detected: dict[str, float | None] = {}
    watched: dict[str, int] = {}
    for s in sigs:
        obs = observations(run.timeline, s)
        watched[s.key] = len(obs)
        detected[s.key] = first_bad(obs, t0, until)
    sigs.append(ALERT)
    watched[ALERT.key], detected[ALERT.key] = int(alerts_read), alert_s
    seen: dict[str, str] = {}
    probe, rp = run.env.liveness, None
    if probe is not None:
        got = [x for x in answers(run.timeline) if x.t >= t0]
        sigs.append(Signal(LIVENESS.key, f"{LIVENESS.label} ({probe.describe()})", LIVENESS.source, LIVENESS.name))
        watched[LIVENESS.key] = len(got)
        rp = replay(got, probe, t0, until) if got else None
        first = rp.first() if rp is not None else None
        detected[LIVENESS.key] = first - t0 if first is not None else None
        if rp is not None:
            seen[LIVENESS.key] = restart_span(rp, t0, until - t0)
    table = detection_table(fault, detected, watched, control_alarms(summary, replica), sigs, window_s=until - t0,
                            seen=seen)
    rep.attach_table(table, name="detection across signals")
    run.timeline.event("detection", fault, **{k: v for k, v in detected.items() if v is not None})
    return rp


def restart_span(rp: Replay, t0: float, window_s: float) -> str:
    """The liveness probe's restarts after a fault at t0, from its luckiest phase to its unluckiest."""
    first, last = rp.first(), rp.last()
    if first is None:
        return f"no restart within {window_s:.0f} s at any of {PHASES} phases"
    if last is None:
        return f"{first - t0:.2f} at the luckiest phase; no restart within {window_s:.0f} s at {PHASES - rp.killed}"
    return f"{first - t0:.2f}-{last - t0:.2f} (restart, by phase)"


def detection_table(fault: str, detected: Mapping[str, float | None], watched: Mapping[str, int],
                    control: Mapping[str, Alarms] | None, sigs: Sequence[Signal], *, window_s: float,
                    seen: Mapping[str, str] | None = None) -> Table:
    """One row per signal: seconds from the fault to its detection (or not within `window_s`, or not watched; `seen`:
    a signal's own words instead), and its false alarms over the slow-but-healthy control (or why none are known)."""
    t = Table(f"detection across signals: {fault}", ["signal", "detected after fault (s)",
                                                    "false alarms in the slow-but-healthy control",
                                                    "longest false alarm (s)"])
    for s in sigs:
        if not watched.get(s.key):
            said = "not watched here"
        else:
            d = detected.get(s.key)
            said = (seen or {}).get(s.key) or (f"{d:.2f}" if d is not None else f"not within {window_s:.0f} s")
        if control is None:
            alarms, longest = "unknown: the control did not run in this session", ""
        elif s.key not in control or not control[s.key].observed:
            alarms, longest = "not watched in the control", ""
        else:
            c = control[s.key]
            alarms, longest = f"{c.count} in {c.observed} observations", f"{c.longest_s:.2f}"
            if s.key == LIVENESS.key:  # replayed, not observed: a restart at some of its phases
                alarms, longest = f"a restart at {c.count} of {c.observed} phases", ""
        t.add(s.label, said, alarms, longest, status=None)
    return t
