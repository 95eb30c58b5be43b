#!/usr/bin/env python3
"""A good client: one chat request through the harness's reference resilient client.

Usage: reference_client.py BASE_URL [--env NAME|PATH] [--timeout S] [--stream]
Exit 0 when the request succeeded, 1 when it failed or was rejected.
Check it: chaos backoff-check --client-cmd '.venv/bin/python examples/clients/reference_client.py {base_url}'
"""
from __future__ import annotations

import argparse
import sys

from chaos.env import RetryPolicy, load
from chaos.errors import ChaosError
from chaos.resilience.client import ResilientClient


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base_url")
    ap.add_argument("--env", help="take the retry policy from this environment (name or YAML path)")
    ap.add_argument("--timeout", type=float, default=10.0, help="per-attempt timeout, seconds")
    ap.add_argument("--stream", action="store_true")
    args = ap.parse_args()
    try:
        env = load(args.env) if args.env else None
        policy = env.retry if env else RetryPolicy()
        client = ResilientClient(args.base_url, policy, model=env.endpoints.model if env else "sim-model",
                                 timeout_s=args.timeout)
        result = client.chat("Say hello.", stream=args.stream)
    except ChaosError as e:
        print(f"reference_client: error: {e}", file=sys.stderr)
        return 2
    print(f"{result.outcome} after {result.attempts} attempt(s): status {result.status}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
