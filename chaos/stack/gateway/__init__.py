"""The reference gateway: OpenAI-compatible proxy over a stable and a canary pool, with the
two-tier breaker and anomaly rules, no-store, x-served-by, HMAC verification and NFKC normalization.

Run it with `chaos gateway --env local` or `python -m chaos.stack.gateway --stable URL --canary URL`.
"""
from chaos.stack.gateway.admin import STATE_METRIC, GatewayMetrics
from chaos.stack.gateway.app import GatewaySettings, build_app, parse_rss, run, serve
from chaos.stack.gateway.breaker import STATE_CODES, RateBreaker, SlidingWindow, State, Transition, WindowStats
from chaos.stack.gateway.normalize import normalize_body, normalize_payload
from chaos.stack.gateway.policy import CANARY, POOLS, STABLE, GatewayPolicy, LeakTrend, is_oom
from chaos.stack.gateway.proxy import Proxy, Replica, parse_replica

__all__ = [
    "CANARY", "POOLS", "STABLE", "STATE_CODES", "STATE_METRIC",
    "GatewayMetrics", "GatewayPolicy", "GatewaySettings", "LeakTrend", "Proxy", "RateBreaker", "Replica",
    "SlidingWindow", "State", "Transition", "WindowStats",
    "build_app", "is_oom", "normalize_body", "normalize_payload", "parse_replica", "parse_rss", "run", "serve",
]
