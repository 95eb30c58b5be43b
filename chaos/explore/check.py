"""Heal-and-check, the final generator of a schedule run (Jepsen's name for it): with every fault
reverted, the system must serve a real completion through its client endpoint, and every replica
directly, within `slas.recovery_s`; and over the whole history no request may be lost, no retry may
come sooner than the client rules allow, and retries may not amplify traffic past the bound."""
from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from chaos.load.records import RequestRecord
from chaos.verify.accounting import accounting_verdict
from chaos.verify.retries import retry_verdict
from chaos.verify.verdict import Verdict


def served_again(env: Any, urls: dict[str, str], t_healed: float, *,
                 probe: Callable[[str], bool], clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep) -> Verdict:
    """Seconds from the heal until `probe(url)` (a real completion) succeeds at the client endpoint
    and at each replica, each against slas.recovery_s."""
    v = Verdict("served again after the heal", window=(t_healed, t_healed + env.slas.recovery_s))
    pending = dict(urls)
    took: dict[str, float] = {}
    deadline = t_healed + env.slas.recovery_s
    while pending and clock() < deadline:
        for name, url in list(pending.items()):
            if probe(url):
                took[name] = clock() - t_healed
                del pending[name]
        if pending:
            sleep(0.2)
    for name in urls:
        got = took.get(name)
        v.add(f"{name}.first_completion_s", env.slas.recovery_s, None if got is None else round(got, 3),
              got is not None and got <= env.slas.recovery_s, "a real completion after every fault was reverted")
    return v


def history_verdicts(env: Any, records: Sequence[RequestRecord], server_log: Any = None) -> list[Verdict]:
    """Over the whole run: nothing lost (accounting), and the client rules on retries."""
    return [accounting_verdict(records, server_log),
            retry_verdict(records, env.retry, max_amplification=env.slas.max_retry_amplification)]
