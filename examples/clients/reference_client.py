#!/usr/bin/env python3
"""A good client: one chat request through the harness's reference resilient client.

Usage: reference_client.py BASE_URL [--env NAME|PATH] [--timeout S] [--stream]
Exit 0 when the request succeeded, 1 when it failed or was rejected. With CHAOS_STREAM=1 (the
streams suite) it streams and prints only the answer text on stdout, its status on stderr.
Check it: chaos backoff-check --client-cmd '.venv/bin/python examples/clients/reference_client.py {base_url}'
"""
from __future__ import annotations

import argparse
import os
import sys

from chaos.env import RetryPolicy, load
from chaos.errors import ChaosError
from chaos.resilience.client import ResilientClient

# what the streams suite asks (chaos/verify/streams.py, for its truth; a test holds them equal). Not
# imported from there: chaos.verify pulls in aiohttp, and a client's start-up is part of what it is timed on
PROMPT, MAX_TOKENS = "Say hello.", 12


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
        streams_check = os.environ.get("CHAOS_STREAM") == "1"
        result = client.chat(PROMPT, stream=args.stream or streams_check, max_tokens=MAX_TOKENS,
                             temperature=0)
    except ChaosError as e:
        print(f"reference_client: error: {e}", file=sys.stderr)
        return 2
    status = f"{result.outcome} after {result.attempts} attempt(s): status {result.status}"
    if streams_check:
        sys.stdout.write(result.text)
        print(f"{status}; error {result.final.error}", file=sys.stderr)
    else:
        print(status)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
