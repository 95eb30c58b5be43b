"""Resilience: the reference resilient client, following the retry schedule (Backoff, from chaos.load.backoff)
that the load users follow too."""
from chaos.load.backoff import Backoff
from chaos.resilience.client import ResilientClient, Result

__all__ = ["Backoff", "ResilientClient", "Result"]
