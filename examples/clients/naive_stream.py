#!/usr/bin/env python3
"""A naive streaming client (the streams suite's negative control): prints each token as it arrives,
trusts `[DONE]` alone, and on a broken stream simply starts the request again, printing on.

Usage: naive_stream.py BASE_URL   (stdlib only; exit 0 once a stream reached [DONE])
"""
from __future__ import annotations

import http.client
import json
import sys
import time
from urllib.parse import urlsplit

PROMPT, MAX_TOKENS = "Say hello.", 12


def attempt(base: str) -> bool:
    u = urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    body = json.dumps({"model": "sim-model", "messages": [{"role": "user", "content": PROMPT}],
                       "max_tokens": MAX_TOKENS, "temperature": 0, "stream": True})
    try:
        conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        for raw in resp:
            line = raw.strip()
            if line == b"data: [DONE]":
                return True
            if line.startswith(b"data: {"):
                for ch in json.loads(line[6:]).get("choices") or []:
                    sys.stdout.write((ch.get("delta") or {}).get("content") or "")
                    sys.stdout.flush()
    except (OSError, http.client.HTTPException, ValueError):
        pass
    finally:
        conn.close()
    return False


def main() -> int:
    for _ in range(3):
        if attempt(sys.argv[1]):
            return 0
        time.sleep(0.5)
    return 1


if __name__ == "__main__":
    sys.exit(main())
