"""Mid-stream faults, judged: what a client showed, what it reported, whether it retried a started stream,
and whether the gateway counted the broken stream as the failure it is.

A client's answer is judged against the truth (the same request answered with no fault; the
replicas decode deterministically): whatever it shows must be the truth or a prefix of it, so a
duplicated or reordered token can never pass; a whole answer must be reported as one and a broken
one as an error. Attempts come from the replica side's log (the fault proxies'): a second attempt
after one that already streamed a token is a retry of a started stream, allowed only when it
resumes (its body continues the partial answer, logged as `resumed`).

A duplicated chunk may be dropped by a client that knows it for one (the server states the
cumulative token count on each chunk: vLLM's continuous_usage_stats); such a client's answer is
whole and equal to the truth, which passes as well as reporting the error does.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from chaos.shared.cpu_watch import CpuUse
from chaos.verify.client_cmd import STREAM_ENV, ClientLimit, run_command, what_it_did
from chaos.verify.starved import starved_verdict
from chaos.verify.verdict import Verdict

__all__ = ["STREAM_ENV", "ClientLimit", "ClientAnswer", "Attempts", "attempts_for", "client_verdict",
           "gateway_verdict", "run_client_command", "steady_run", "steady_verdict", "PROMPT", "MAX_TOKENS"]
START_ALLOWANCE_S = 60.0  # a fault-free run's own bound on top of the retry deadline: a slower start is the verdict
PROMPT, MAX_TOKENS = "Say hello.", 12  # what every client is asked in the streams suite (temperature 0)


@dataclass
class ClientAnswer:
    """One logical request as a client finished it."""

    client: str
    ok: bool
    shown: str
    finish_reason: str | None = None
    error: str | None = None
    request_id: str | None = None
    window: tuple[float, float] = (0.0, 0.0)
    order: str | None = None  # how its stream order was judged ("proven", "not proven: ..."); None: not told
    timed_out: bool = False   # a command killed at its limit
    cpu: CpuUse | None = None  # a command's CPU time and run-queue wait (a starved one judges the host)


@dataclass
class Attempts:
    """The replica-side log lines that belong to one logical request, oldest first."""

    lines: list[dict[str, Any]] = field(default_factory=list)

    @property
    def says_hits(self) -> bool:
        """Whether these lines come from a log that names the rules that hit (the fault proxy's)."""
        return bool(self.lines) and all("rule" in l for l in self.lines)

    @property
    def hit(self) -> bool:
        """Whether a fault rule touched any attempt (the fault proxy logs the rules that hit)."""
        return any(l.get("rule") for l in self.lines)

    def retried_after_first_token(self) -> bool:
        for prev, nxt in zip(self.lines, self.lines[1:], strict=False):
            if int(prev.get("output_tokens") or 0) > 0 and not nxt.get("resumed"):
                return True
        return False


def attempts_for(answer: ClientAnswer, log: Iterable[dict[str, Any]], *, slack_s: float = 0.05) -> Attempts:
    """The log lines of an answer: by its request id when it has one, else every POST in its window
    (a client command runs alone, so everything the replicas saw meanwhile is its own)."""
    t0, t1 = answer.window
    if answer.request_id:
        lines = [l for l in log if l.get("request_id") == answer.request_id]
    else:
        lines = [l for l in log if t0 <= float(l.get("t_arrival") or 0) <= t1 + slack_s]  # none before it started
    return Attempts(sorted(lines, key=lambda l: float(l.get("t_arrival") or 0)))


def _first_difference(shown: str, truth: str) -> str:
    i = next((i for i, (a, b) in enumerate(zip(shown, truth, strict=False)) if a != b), min(len(shown), len(truth)))
    return f"at char {i}: shown {shown[max(0, i - 12):i + 12]!r}, truth {truth[max(0, i - 12):i + 12]!r}"


def client_verdict(name: str, answers: Sequence[ClientAnswer], attempts: Sequence[Attempts], *, truth: str,
                   truth_finish: str | None, expect_whole: bool | None) -> Verdict:
    """Rows: shown_in_order, reported_right, finish_reason (whole answers), no_retry_of_started_stream,
    exited_in_time (commands), order_stated (clients that say how they judged order).

    `expect_whole` None: a whole answer (a repeat dropped) or an error are both right; only a whole one
    that differs from the truth is wrong (shown_in_order names where)."""
    v = Verdict(f"client {name}")
    bad_text = [a for a in answers if not truth.startswith(a.shown) or (a.ok and a.shown != truth)]
    v.add("shown_in_order", 0, len(bad_text), not bad_text,
          "shown text is the truth or a prefix of it (no duplicated or reordered token)"
          + (f"; {_first_difference(bad_text[0].shown, truth)}" if bad_text else ""))
    # a stream the fault never touched must be whole: real vLLM sends several tokens in one event when
    # its API server falls behind (one canary answered all 12 tokens in a single event), so a rule
    # "after 3 tokens" (3 events) may never fire on it; the replica-side log says which it hit
    if expect_whole is None:
        wrong = [a for a in answers if a.ok and a.shown != truth]
        want = "the whole answer or an error"
    else:
        whole = [expect_whole or (at.says_hits and not at.hit) for at in _pad(attempts, len(answers))]
        wrong = [a for a, w in zip(answers, whole, strict=True) if a.ok != w]
        untouched = sum(1 for w in whole if w) if not expect_whole else 0
        want = "a whole answer" if expect_whole else "an error" + (f" ({untouched} not hit: whole)" if untouched else "")
    v.add("reported_right", want, f"{len(answers) - len(wrong)}/{len(answers)}", not wrong,
          "; ".join(f"ok={a.ok} error={a.error}" for a in wrong[:3]))
    if expect_whole:
        known = [a for a in answers if a.finish_reason is not None]
        off = [a.finish_reason for a in known if a.finish_reason != truth_finish]
        v.add("finish_reason", truth_finish, off[0] if off else truth_finish if known else None,
              (not off) if known else None, "" if known else "the client does not report a finish_reason")
    _exits_and_order(v, answers, _pad(attempts, len(answers)))
    retried = sum(1 for at in attempts if at.retried_after_first_token())
    seen = sum(len(at.lines) for at in attempts)
    v.add("no_retry_of_started_stream", 0, retried, (retried == 0) if seen else None,
          f"{seen} attempts reached the replicas for {len(answers)} requests" if seen
          else "no replica-side log: retries cannot be judged")
    if any(a.cpu is not None for a in answers):
        starved_verdict(v, {f"run {i + 1}": a.cpu for i, a in enumerate(answers)})
    return v


def _exits_and_order(v: Verdict, answers: Sequence[ClientAnswer], attempts: Sequence[Attempts]) -> None:
    late = [(a, at) for a, at in zip(answers, attempts, strict=True) if a.timed_out]
    if late:
        a, at = late[-1]
        v.add("exited_in_time", 0, len(late), False,
              f"{a.error}: {what_it_did(a.shown, a.window[0], a.window[1], at.lines)}")
    told = [a.order for a in answers if a.order is not None]
    if told:
        unproven = next((o for o in told if not o.startswith("proven")), None)
        dropped = sum(1 for o in told if "dropped" in o)
        if unproven is not None:
            v.not_proven("order_stated", "every chunk states its token count", unproven.split(";")[0],
                         f"{unproven}: a repeat inside a merged delta cannot be told from the answer")
        else:
            v.add("order_stated", "every chunk states its token count", "yes", True,
                  f"{dropped} answer(s) had a repeated chunk dropped" if dropped else "")


def _pad(attempts: Sequence[Attempts], n: int) -> list[Attempts]:
    return list(attempts)[:n] + [Attempts() for _ in range(n - len(attempts))]


def gateway_verdict(errors_before: float | None, errors_after: float | None, hits: int, *,
                    expect_failures: bool) -> Verdict:
    """The gateway's failure counter moved by exactly the broken streams (or not at all for a stall)."""
    v = Verdict("gateway counted each broken stream")
    if errors_before is None or errors_after is None:
        v.add("gateway_failures", "counted", None, None, "the gateway exposes no request outcome counter")
        return v
    moved = int(round(errors_after - errors_before))
    want = hits if expect_failures else 0
    v.add("gateway_failures", want, moved, moved == want,
          f"{hits} requests hit by the fault at the replicas; the gateway counted {moved} failures")
    return v


def run_client_command(name: str, template: str, base_url: str, *, timeout_s: float) -> ClientAnswer:
    """Run a client command once with CHAOS_STREAM=1: stdout is what it showed, exit 0 means a whole answer."""
    r = run_command(template, base_url, timeout_s=timeout_s)
    return ClientAnswer(name, r.ok, r.shown, error=r.error, window=(r.t0, r.t1), timed_out=r.timed_out, cpu=r.cpu)


def steady_run(name: str, template: str, base_url: str, deadline_s: float, truth: ClientAnswer, *,
               fault_extra_s: float = 0.0) -> tuple[ClientAnswer, ClientLimit]:
    """One fault-free run of a client command, and the limit its runs under the fault get from it."""
    ran = run_client_command(name, template, base_url, timeout_s=deadline_s + START_ALLOWANCE_S)
    return ran, ClientLimit.derive(steady_run_s=ran.window[1] - ran.window[0], deadline_s=deadline_s,
                                   engine_e2e_s=truth.window[1] - truth.window[0], fault_extra_s=fault_extra_s)


def steady_verdict(name: str, ran: ClientAnswer, truth: str) -> Verdict:
    """The fault-free run gave the truth, whole: otherwise nothing under a fault says much about the client."""
    v = Verdict(f"client {name} with no fault")
    whole = ran.ok and ran.shown == truth
    v.add("fault_free_answer", "the truth, whole", "whole" if whole else ran.error or f"shown {ran.shown!r}", whole,
          f"{ran.window[1] - ran.window[0]:.1f} s, the measure of its limit")
    starved_verdict(v, {"fault-free run": ran.cpu})
    return v
