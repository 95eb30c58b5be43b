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
from chaos.verify.detection import ALERT, Alarms, Signal, control_keys, false_alarms, first_bad, observations, signals
from chaos.verify.verdict import Verdict

if TYPE_CHECKING:
    from chaos.experiment.run import Run
    from chaos.experiment.running_stack import RunningStack as StackHandle
    from chaos.report.summary import SummaryCollector

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
    for s in signals(replica):
        count, longest, observed = control_keys(s)
        if count in got:
            out[s.key] = Alarms(int(got[count]), float(got.get(longest, 0.0)), int(got.get(observed, 0)))
    return out


def detection_control(stack: StackHandle, summary: SummaryCollector, name: str) -> Experiment:
    """The slow-but-healthy control on target `name`, as an Experiment for the one runner."""
    env = stack.env
    rep.labels(epic="Resilience", feature="Detection across signals", story="slow-but-healthy control",
               suite="recovery")
    rep.title(f"slow-but-healthy control on {name}: long prefills at the load's peak, no fault")

    def steps(run: Run) -> None:
        url = stack.direct_url(name)
        run.observe(url)
        run.observe(env.endpoints.api, source="api")
        run.add_observer(engine_counter_scraper(url, run.timeline, name).start())  # the heartbeat
        mix = long_prompt_mix(env.load.classes)
        control_s = max(CONTROL_MIN_S, run.scaled(60))
        with run.phase("start load", mix=", ".join(mix), users=env.load.users):
            run.start_load(duration_s=control_s + 40, mix=mix, users=env.load.users)
        run.steady_state(2.0)
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
        run.judge("the control was healthy, and its named timeouts would not kill it", [av, v])

    return Experiment(f"detection-control-{name}", steps=steps, hurt=())


def attach_detection(run: Run, summary: SummaryCollector, fault: str, replica: str, t0: float,
                     alert_s: float | None, alerts_read: bool) -> None:
    """A recovery scenario's detection table, attached to its report: each signal's seconds from the fault at
    `t0` to its first bad observation (the alert's `alert_s`, where `alerts_read`), beside the control's false
    alarms; the detections go into the run's timeline as one event."""
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
    table = detection_table(fault, detected, watched, control_alarms(summary, replica), sigs, window_s=until - t0)
    rep.attach_table(table, name="detection across signals")
    run.timeline.event("detection", fault, **{k: v for k, v in detected.items() if v is not None})


def detection_table(fault: str, detected: Mapping[str, float | None], watched: Mapping[str, int],
                    control: Mapping[str, Alarms] | None, sigs: Sequence[Signal], *, window_s: float) -> Table:
    """One row per signal: seconds from the fault to its detection (or not within `window_s`, or not watched),
    and its false alarms over the slow-but-healthy control (or why none are known)."""
    t = Table(f"detection across signals: {fault}", ["signal", "detected after fault (s)",
                                                    "false alarms in the slow-but-healthy control",
                                                    "longest false alarm (s)"])
    for s in sigs:
        if not watched.get(s.key):
            seen = "not watched here"
        else:
            d = detected.get(s.key)
            seen = f"{d:.2f}" if d is not None else f"not within {window_s:.0f} s"
        if control is None:
            alarms, longest = "unknown: the control did not run in this session", ""
        elif s.key not in control or not control[s.key].observed:
            alarms, longest = "not watched in the control", ""
        else:
            c = control[s.key]
            alarms, longest = f"{c.count} in {c.observed} observations", f"{c.longest_s:.2f}"
        t.add(s.label, seen, alarms, longest, status=None)
    return t
