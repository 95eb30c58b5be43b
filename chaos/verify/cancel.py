"""Cancellation frees compute: after clients hang up mid-stream (chaos.load.hangup), every hop lets their
requests go within `slas.cancel_s`.

- The gateway hop: the fault proxy in front of each replica logs when each upstream request ended and how
  (docs/faultproxy.md: outcome `abort` when its client, the gateway, went away first). A hung-up request
  whose line says it ran on (another outcome, ended later than cancel_s after the hang-up) or that has
  no line yet when the log is read at least cancel_s after the hang-up was held open.
- The engine: running requests (summed over the replicas' /metrics) back to the staying streams' level
  (the baseline, measured while they ran alone) within cancel_s of the last hang-up, the generation
  rate after that no more than RATE_TOLERANCE times the baseline's, and its abort counter
  (`request_success_total{finished_reason="abort"}`) up by at least the clients hung up by then.

A hop that cannot be observed (no fault proxy, /metrics not answering, a measure that could not tell
held from freed) is "not proven" with why, never a pass.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from chaos.load.hangup import HangUpRun, StreamClient
from chaos.observe.engine_load import EngineLoad
from chaos.verify.verdict import Verdict

RATE_TOLERANCE = 1.5  # the freed rate may exceed the remaining load's by half (step times vary with the batch)
MIN_RATE_WINDOW_S = 0.5  # a rate over less than this says nothing


def cancel_verdict(run: HangUpRun, proxy_rows: Sequence[dict[str, Any]] | None, engine: EngineLoad | None, *,
                   cancel_s: float, read_at: float, no_proxy_why: str = "", no_engine_why: str = "") -> Verdict:
    """Judge one hang-up step (`read_at`: when the fault proxies' log was read; None rows: that hop unobserved)."""
    hung = [c for c in run.clients if c.role == "hangup"]
    t_last = run.t_last_hangup
    v = Verdict("cancellation frees compute", data={"cancel_s": cancel_s, "t_last_hangup": t_last})
    done = [c for c in hung if c.hung_up and c.tokens >= run.step.after_tokens]
    v.add("clients_hung_up", run.step.clients, len(done), len(done) == run.step.clients,
          f"after {run.step.after_tokens} tokens each" + _why_not(hung, run.step.after_tokens))
    if t_last is None or not done:
        return v  # nothing was hung up as declared: no hop had anything to let go
    _upstream_rows(v, done, proxy_rows, cancel_s, read_at, no_proxy_why)
    _engine_rows(v, run, engine, cancel_s, t_last, no_engine_why)
    _abort_row(v, len(done), engine, cancel_s, t_last, run.baseline, no_engine_why)
    return v


def _abort_row(v: Verdict, hung: int, engine: EngineLoad | None, cancel_s: float, t_last: float,
               baseline: tuple[float, float] | None, why: str) -> None:
    counts = engine.aborted() if engine is not None else []
    before = [n for t, n in counts if baseline is not None and baseline[0] <= t <= baseline[1]]
    by = [n for t, n in counts if t <= t_last + cancel_s]
    if not before or not by or counts[-1][0] < t_last + cancel_s:
        v.not_proven("engine_aborted_requests", hung, None, why or "no full sweep of the replicas' abort counter "
                     "(request_success_total{finished_reason=\"abort\"}) from the baseline to cancel_s after the hang-up")
        return
    n = int(by[-1] - before[0])
    if n == 0 and counts[-1][1] == before[0]:  # not late: never, over the whole sweep
        # vLLM 0.32 drops a request its client left without finish stats (OutputProcessor.abort_requests), so its
        # abort counter never moves for a hang-up (measured: 0 of 4 on local-vllm while the upstream let go in
        # 0.03 s and running requests fell 6 -> 2): the running and generation rows judge the freeing there
        v.add("engine_aborted_requests", hung, n, None, "the engines counted no abort at all: an engine that does not "
              "count its clients' hang-ups (vLLM's request_success_total{finished_reason=\"abort\"} counts only its "
              "own aborts); the running requests and generation rate rows judge whether it let them go")
        return
    v.add("engine_aborted_requests", hung, n, n >= hung, f"aborts counted by the engines from the baseline to "
          f"cancel_s after the hang-up, against {hung} clients hung up")


def _why_not(hung: list[StreamClient], k: int) -> str:
    bad = [c for c in hung if not (c.hung_up and c.tokens >= k)]
    if not bad:
        return ""
    c = bad[0]
    return f"; {len(bad)} did not: {c.request_id} saw {c.tokens} tokens ({c.error or 'ended first'})"


MINTED_ID_PREFIX = "fp-"  # the id the fault proxy gives a request that came without x-request-id (upstream.go)


def _upstream_rows(v: Verdict, hung: list[StreamClient], rows: Sequence[dict[str, Any]] | None, cancel_s: float,
                   read_at: float, why: str) -> None:
    check = "upstream_let_go_s"
    if rows is None:
        v.not_proven(check, cancel_s, None, why or "no fault proxy between the gateway and the replicas: nothing "
                     "logs when the gateway's upstream request ended")
        return
    by_id = {r.get("request_id"): r for r in rows}
    missing = [c.request_id for c in hung if c.request_id not in by_id]
    since = min(c.t_sent for c in hung)
    minted = [r for r in rows if str(r.get("request_id") or "").startswith(MINTED_ID_PREFIX)
              and float(r.get("t_arrival") or 0.0) >= since]
    if missing and minted:
        # the fault proxy names a request that came without x-request-id itself: this gateway did not pass the
        # clients' ids on, so a missing line is no proof that the request is still open
        v.not_proven(check, cancel_s, None, f"the gateway did not pass x-request-id on: the fault proxies logged "
                     f"{len(minted)} request(s) under their own ids ({minted[0].get('request_id')}, ...) since the "
                     f"clients sent, so {len(missing)} hung-up request(s) cannot be found in their log")
        return
    let_go: list[float] = []
    held: list[str] = []
    for c in hung:
        assert c.t_hangup is not None
        line = by_id.get(c.request_id)
        if line is None or line.get("t_finish") is None:
            if read_at - c.t_hangup < cancel_s:
                v.not_proven(check, cancel_s, None, f"the log was read {read_at - c.t_hangup:.2f} s after "
                             f"{c.request_id} hung up, before cancel_s: an open request cannot be told from a held one")
                return
            held.append(f"{c.request_id} still open {read_at - c.t_hangup:.1f} s after its client left")
            continue
        after = float(line["t_finish"]) - c.t_hangup
        if line.get("outcome") == "abort" or after <= cancel_s:
            let_go.append(max(0.0, after))
        if after > cancel_s:
            held.append(f"{c.request_id} ended {after:.1f} s after its client left (outcome {line.get('outcome')})")
    measured = math.inf if held else max(let_go)
    aborted = sum(1 for c in hung if (by_id.get(c.request_id) or {}).get("outcome") == "abort")
    detail = (f"{len(held)} of {len(hung)} upstream requests held open: " + "; ".join(held[:3]) if held else
              f"{aborted} of {len(hung)} upstream requests ended by client disconnect (fault proxy outcome abort), "
              f"{min(let_go):.2f}-{max(let_go):.2f} s after the hang-up")
    v.add(check, cancel_s, "held" if held else round(measured, 3), not held, detail)


def _engine_rows(v: Verdict, run: HangUpRun, engine: EngineLoad | None, cancel_s: float, t_last: float,
                 why: str) -> None:
    totals = engine.totals() if engine is not None else []
    if engine is None or run.baseline is None or len(totals) < 2:
        reason = why or ("no replica /metrics to read" if engine is None else
                         "no baseline window of the staying streams" if run.baseline is None else
                         "too few full sweeps of the replicas' /metrics" +
                         (f" ({'; '.join(f'{k}: {e}' for k, e in engine.errors.items())})" if engine.errors else ""))
        for check in ("engine_running_back_s", "generation_tokens_per_s_after"):
            v.not_proven(check, cancel_s if check.endswith("_s") else None, None, reason)
        return
    b0, b1 = run.baseline
    base_running = max((r for t, r, _ in totals if b0 <= t <= b1), default=None)
    base_rate = _rate(totals, b0, b1)
    hung = [c for c in run.clients if c.role == "hangup" and c.t_hangup is not None]
    t_held0 = max((c.t_first_token or c.t_hangup or t_last) for c in hung) if hung else t_last
    t_held1 = min(c.t_hangup for c in hung if c.t_hangup is not None) if hung else t_last
    held_running = max((r for t, r, _ in totals if t_held0 <= t <= t_held1), default=None)
    held_rate = _rate(totals, t_held0, t_held1)
    v.data.update(baseline_running=base_running, baseline_rate=base_rate, held_running=held_running,
                  held_rate=held_rate)
    if base_running is None or held_running is None or held_running <= base_running:
        v.not_proven("engine_running_back_s", cancel_s, None,
                     f"the engine never showed the hung-up requests running (baseline {base_running}, while held "
                     f"{held_running}): the sweeps cannot tell freed from held")
    else:
        after = [(t, r) for t, r, _ in totals if t >= t_last]
        back = next((t for i, (t, r) in enumerate(after) if all(x <= base_running for _, x in after[i:])), None)
        last_t = after[-1][0] if after else t_last
        if back is None:
            v.add("engine_running_back_s", cancel_s, "never", False,
                  f"running requests stayed above the staying streams' {base_running:g} until the last sweep "
                  f"{last_t - t_last:.1f} s after the hang-up (held at {held_running:g})")
        else:
            s = back - t_last
            v.add("engine_running_back_s", cancel_s, round(s, 3), s <= cancel_s,
                  f"{held_running:g} running while held, back to {base_running:g} (the staying streams')")
    after_rate = _rate(totals, t_last + cancel_s, math.inf)
    limit = None if base_rate is None else round(base_rate * RATE_TOLERANCE, 1)
    if base_rate is None or after_rate is None or held_rate is None or limit is None or held_rate <= limit:
        v.not_proven("generation_tokens_per_s_after", limit, after_rate,
                     f"the rate cannot tell freed from held here (baseline {_r(base_rate)}, while held "
                     f"{_r(held_rate)}, after {_r(after_rate)} tokens/s; each over >= {MIN_RATE_WINDOW_S:g} s)")
        return
    v.add("generation_tokens_per_s_after", limit, round(after_rate, 1), after_rate <= limit,
          f"{_r(held_rate)} tokens/s while held, the staying streams' {_r(base_rate)} x {RATE_TOLERANCE:g} allowed "
          f"from cancel_s after the hang-up")


def _rate(totals: list[tuple[float, float, float]], t0: float, t1: float) -> float | None:
    """Generated tokens per second between the first and last full sweep in [t0, t1]."""
    inside = [(t, g) for t, _, g in totals if t0 <= t <= t1]
    if len(inside) < 2 or inside[-1][0] - inside[0][0] < MIN_RATE_WINDOW_S:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def _r(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f}"
