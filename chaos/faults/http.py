"""HTTP and stream faults through the fault proxy in front of a replica (any OpenAI-compatible backend).

    with http_error(proxy, 503, fraction=0.05, retry_after="1"):   # 5 % of requests answered 503
        ...
    stream_cut(proxy, after_tokens=3) & slow_first_token(proxy, 1.5)

Each fault is one proxy rule named `chaos-<kind>-<id>`, matching the `/v1/*` API calls unless given
another `match` (`{}` matches everything, health checks and metrics scrapes included). Proof of effect: the rule is listed while
injected, and at revert the proxy's counters show it hit traffic; a rule that hit none raises
FaultNotEffective (pass expect_hits=False for a fault that may legitimately see no traffic).
"""
from __future__ import annotations

import uuid
from typing import Any

from chaos.errors import ConfigError, FaultError, FaultNotEffective
from chaos.faults import _undo
from chaos.faults.base import Fault
from chaos.faults.proxy_admin import RULE_PREFIX, FaultProxyAdmin, FaultProxyError

INFERENCE = {"path": "/v1/*"}
KINDS = ("abort", "oom", "delay", "stall", "cut", "error_chunk", "malformed_chunk", "duplicate_chunk",
         "rewrite_model", "header", "hang", "corrupt_answer")


class HttpFault(Fault):
    """One fault-proxy rule (abort, oom, delay, stall, cut, error_chunk, ..., hang) on one replica's proxy."""

    def __init__(self, proxy: FaultProxyAdmin, rule_kind: str, *, fraction: float = 1.0, spread: str = "even",
                 match: dict[str, Any] | None = None, expect_hits: bool = True, seed: int | None = None,
                 **fields: Any) -> None:
        super().__init__(seed=seed)
        if rule_kind not in KINDS:
            raise ConfigError(f"http fault: unknown kind {rule_kind!r}; expected one of {', '.join(KINDS)}")
        self.proxy, self.rule_kind, self.expect_hits = proxy, rule_kind, expect_hits
        self.kind = f"http-{rule_kind.replace('_', '-')}"
        self.name = f"{RULE_PREFIX}{rule_kind.replace('_', '-')}-{uuid.uuid4().hex[:8]}"
        # by default only the API calls: a gateway's /health and /metrics polls must not use up a fraction
        match = INFERENCE if match is None else match
        self.rule: dict[str, Any] = {"name": self.name, "kind": rule_kind, "fraction": fraction, "spread": spread,
                                     "seed": self.seed % (2**31), **({"match": match} if match else {}), **fields}

    def params(self) -> dict[str, Any]:
        return {"proxy": self.proxy.name, "url": self.proxy.url, "rule": dict(self.rule),
                "token": self.proxy.token.describe()}

    def _preflight(self) -> None:
        try:
            self.proxy.rules()  # answers, and the token is right
        except FaultProxyError as e:
            raise FaultError(str(e), fault=self.kind) from None

    def _plan(self) -> list[str]:
        return [f"POST {self.proxy.url}/_chaos/rules {self.rule}"]

    def _undo(self) -> list[dict[str, Any]]:
        return [_undo.http("DELETE", f"{self.proxy.url}/_chaos/rules/{self.name}", auth=self.proxy.token.describe())]

    def _apply(self) -> None:
        try:
            self.proxy.set_rule(self.rule)
        except FaultProxyError as e:
            raise FaultError(str(e), fault=self.kind) from None

    def _check(self) -> None:
        try:
            got = self.proxy.rule(self.name)
        except FaultProxyError as e:
            raise FaultNotEffective(f"fault proxy {self.proxy.name} not answering: {e}", fault=self.kind) from None
        if got is None:
            raise FaultNotEffective(f"rule {self.name} not listed by fault proxy {self.proxy.name}", fault=self.kind)
        self.evidence.update(rule=self.name, proxy=self.proxy.name, **_counters(got))

    def _unapply(self) -> None:
        try:
            final = self.proxy.remove_rule(self.name)
        except FaultProxyError as e:
            raise FaultError(str(e), fault=self.kind) from None
        if final is not None:
            self.evidence.update(_counters(final))

    def counters(self) -> dict[str, int]:
        """The rule's live counters (seen, matched, hits) while it is in place."""
        got = self.proxy.rule(self.name)
        return _counters(got) if got else {}

    def revert(self, *, check: bool = True, by: str = "revert") -> None:
        was_injected = self.injected
        super().revert(check=check, by=by)
        if was_injected and check and self.expect_hits and self.evidence.get("hits", 0) == 0:
            raise FaultNotEffective(f"rule {self.name} on {self.proxy.name} hit no request "
                                    f"({self.evidence.get('matched', 0)} matched of {self.evidence.get('seen', 0)} seen)",
                                    fault=self.kind)


def _counters(rule: dict[str, Any]) -> dict[str, int]:
    return {k: int(rule.get(k, 0)) for k in ("seen", "matched", "hits")}


# -- the faults, by what they do -------------------------------------------------------------------
def http_error(proxy: FaultProxyAdmin, status: int = 503, *, retry_after: str | float | None = None,
               message: str | None = None, **kw: Any) -> HttpFault:
    """Answer `status` (vLLM's error JSON, Retry-After when given) instead of asking the replica."""
    extra: dict[str, Any] = {"status": status}
    if retry_after is not None:
        extra["retry_after"] = str(retry_after)
    if message:
        extra["message"] = message
    return HttpFault(proxy, "abort", **extra, **kw)


def oom_error(proxy: FaultProxyAdmin, **kw: Any) -> HttpFault:
    """500 with torch's "CUDA out of memory" message, as a kept-alive vLLM answers its OOM."""
    return HttpFault(proxy, "oom", **kw)


def slow_headers(proxy: FaultProxyAdmin, seconds: float, **kw: Any) -> HttpFault:
    """Hold the response headers for `seconds`."""
    return HttpFault(proxy, "delay", headers_s=seconds, **kw)


def slow_first_token(proxy: FaultProxyAdmin, seconds: float, **kw: Any) -> HttpFault:
    """Hold the first token chunk for `seconds` (a slow prefill)."""
    return HttpFault(proxy, "delay", first_token_s=seconds, **kw)


def stream_stall(proxy: FaultProxyAdmin, after_tokens: int = 4, seconds: float = 5.0, **kw: Any) -> HttpFault:
    """After k token chunks the stream pauses `seconds`, then goes on."""
    return HttpFault(proxy, "stall", after_tokens=after_tokens, seconds=seconds, **kw)


def stream_cut(proxy: FaultProxyAdmin, after_tokens: int = 4, *, done: bool = False, **kw: Any) -> HttpFault:
    """After k token chunks the connection closes (with done=True: a clean `[DONE]` and no finish_reason)."""
    return HttpFault(proxy, "cut", after_tokens=after_tokens, done=done, **kw)


def error_chunk(proxy: FaultProxyAdmin, after_tokens: int = 4, **kw: Any) -> HttpFault:
    """After k token chunks: `data: {"error": ...}` then `[DONE]`, status still 200 (as vLLM)."""
    return HttpFault(proxy, "error_chunk", after_tokens=after_tokens, **kw)


def malformed_chunk(proxy: FaultProxyAdmin, after_tokens: int = 4, **kw: Any) -> HttpFault:
    """After k token chunks one chunk of broken JSON, then the stream goes on."""
    return HttpFault(proxy, "malformed_chunk", after_tokens=after_tokens, **kw)


def duplicate_chunk(proxy: FaultProxyAdmin, after_tokens: int = 4, **kw: Any) -> HttpFault:
    """The token chunk after the k-th is sent twice."""
    return HttpFault(proxy, "duplicate_chunk", after_tokens=after_tokens, **kw)


def rewrite_model(proxy: FaultProxyAdmin, model: str, **kw: Any) -> HttpFault:
    """Answers claim to come from `model` (the misrouting stand-in)."""
    return HttpFault(proxy, "rewrite_model", model=model, **kw)


def corrupt_answer(proxy: FaultProxyAdmin, after_tokens: int = 0, *, insert: str | None = None,
                   **kw: Any) -> HttpFault:
    """The answer's text after k token chunks gets `insert` ("corrupted " by default) put in: a whole,
    well-formed answer that is wrong (the answers verdict's planted corruption; streamed or not)."""
    extra: dict[str, Any] = {"insert": insert} if insert else {}
    return HttpFault(proxy, "corrupt_answer", after_tokens=after_tokens, **extra, **kw)


def header_fault(proxy: FaultProxyAdmin, *, drop: list[str] | None = None, set: dict[str, str] | None = None,
                 **kw: Any) -> HttpFault:
    """Drop or set response headers."""
    drops: dict[str, Any] = {"drop": list(drop)} if drop else {}
    sets: dict[str, Any] = {"set": dict(set)} if set else {}
    return HttpFault(proxy, "header", **drops, **sets, **kw)


def hang(proxy: FaultProxyAdmin, **kw: Any) -> HttpFault:
    """Hold requests and answer nothing on a live socket (a hung engine); revert lets them through."""
    return HttpFault(proxy, "hang", **kw)
