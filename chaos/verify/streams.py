"""Mid-stream faults, judged: what a client showed, what it reported, whether it retried a started stream,
and whether the gateway counted the broken stream as the failure it is.

A client's answer is judged against the truth (the same request answered with no fault; the
replicas decode deterministically): whatever it shows must be the truth or a prefix of it, so a
duplicated or reordered token can never pass; a whole answer must be reported as one and a broken
one as an error. Attempts come from the replica side's log (the fault proxies'): a second attempt
after one that already streamed a token is a retry of a started stream, allowed only when it
resumes (its body continues the partial answer, logged as `resumed`).
"""
from __future__ import annotations

import os
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from chaos.verify.verdict import Verdict

STREAM_ENV = "CHAOS_STREAM"  # set to 1 for a client command: stream, print the text shown, exit 0 iff whole
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
        for prev, nxt in zip(self.lines, self.lines[1:]):
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
    i = next((i for i, (a, b) in enumerate(zip(shown, truth)) if a != b), min(len(shown), len(truth)))
    return f"at char {i}: shown {shown[max(0, i - 12):i + 12]!r}, truth {truth[max(0, i - 12):i + 12]!r}"


def client_verdict(name: str, answers: Sequence[ClientAnswer], attempts: Sequence[Attempts], *, truth: str,
                   truth_finish: str | None, expect_whole: bool) -> Verdict:
    """Rows: shown_in_order, reported_right, finish_reason (whole answers), no_retry_of_started_stream."""
    v = Verdict(f"client {name}")
    bad_text = [a for a in answers if not truth.startswith(a.shown) or (a.ok and a.shown != truth)]
    v.add("shown_in_order", 0, len(bad_text), not bad_text,
          "shown text is the truth or a prefix of it (no duplicated or reordered token)"
          + (f"; {_first_difference(bad_text[0].shown, truth)}" if bad_text else ""))
    # a stream the fault never touched must be whole: real vLLM sends several tokens in one event when
    # its API server falls behind (one canary answered all 12 tokens in a single event), so a rule
    # "after 3 tokens" (3 events) may never fire on it; the replica-side log says which it hit
    whole = [expect_whole or (at.says_hits and not at.hit) for at in _pad(attempts, len(answers))]
    wrong = [a for a, w in zip(answers, whole) if a.ok != w]
    untouched = sum(1 for w in whole if w) if not expect_whole else 0
    want = "a whole answer" if expect_whole else "an error" + (f" ({untouched} not hit: whole)" if untouched else "")
    v.add("reported_right", want, f"{len(answers) - len(wrong)}/{len(answers)}", not wrong,
          "; ".join(f"ok={a.ok} error={a.error}" for a in wrong[:3]))
    if expect_whole:
        known = [a for a in answers if a.finish_reason is not None]
        off = [a.finish_reason for a in known if a.finish_reason != truth_finish]
        v.add("finish_reason", truth_finish, off[0] if off else truth_finish if known else None,
              (not off) if known else None, "" if known else "the client does not report a finish_reason")
    retried = sum(1 for at in attempts if at.retried_after_first_token())
    seen = sum(len(at.lines) for at in attempts)
    v.add("no_retry_of_started_stream", 0, retried, (retried == 0) if seen else None,
          f"{seen} attempts reached the replicas for {len(answers)} requests" if seen
          else "no replica-side log: retries cannot be judged")
    return v


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
    cmd = template.replace("{base_url}", shlex.quote(base_url))
    t0 = time.time()
    try:
        p = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, timeout=timeout_s, text=True,
                           env={**os.environ, STREAM_ENV: "1"}, start_new_session=True)
        out, ok, err = p.stdout, p.returncode == 0, (p.stderr.strip().splitlines() or [""])[-1][:200]
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        ok, err = False, f"no exit within {timeout_s:g} s"
    shown = out[:-1] if out.endswith("\n") else out  # the one newline a print() adds is not part of the answer
    return ClientAnswer(name, ok, shown, error=None if ok else err, window=(t0, time.time()))
