"""Resilience: the retry schedule (Backoff), the reference resilient client, HMAC signing."""
from chaos.resilience.backoff import Backoff
from chaos.resilience.client import ResilientClient, Result

__all__ = ["Backoff", "ResilientClient", "Result"]
