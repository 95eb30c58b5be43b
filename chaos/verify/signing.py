"""Is request signing enforced where the user's traffic goes? Unsigned, tampered, wrong-key, expired and
replayed requests to the environment's own API must be refused (401 or 403), and a correctly signed one
served. Every case carries the same API key and the same body shape, so a refusal can only be the
signature's; the signed request is the control: if it is refused too, the refusals prove nothing and the
verdict fails on it. The scheme is chaos.shared.signing's (X-Chaos-Timestamp, -Nonce, -Signature)."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from urllib.parse import urlparse

from chaos.shared import signing
from chaos.verify.verdict import Verdict

CHAT = "/v1/chat/completions"
REFUSED = (401, 403)
Call = Callable[[str, bytes, dict[str, str]], int]  # (url, body, headers) -> HTTP status


def post(url: str, body: bytes, headers: dict[str, str]) -> int:
    """POST and return the status; an error status is an answer, not an exception."""
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            r.read()
            return int(r.status)
    except urllib.error.HTTPError as e:
        e.read()
        return int(e.code)


def signing_verdict(api: str, key: bytes, model: str, *, api_key: str | None = None, call: Call = post,
                    now: Callable[[], float] = time.time) -> Verdict:
    """Send the six cases to `api` (the environment's endpoint) in order and judge each answer."""
    path = urlparse(api).path.rstrip("/") + CHAT  # what the gateway sees and verifies
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "sign me"}], "max_tokens": 4,
                       "stream": False}).encode()
    auth = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    good = signing.sign(key, "POST", path, body, timestamp=now())
    cases = [  # (name, body, signature headers, must be served)
        ("signed", body, good, True),
        ("replayed", body, good, False),
        ("unsigned", body, {}, False),
        ("tampered-body", body.replace(b"sign me", b"sign you"), signing.sign(key, "POST", path, body, timestamp=now()),
         False),
        ("wrong-key", body, signing.sign(key + b"-not", "POST", path, body, timestamp=now()), False),
        ("expired", body, signing.sign(key, "POST", path, body, timestamp=now() - 3600), False),
    ]
    v = Verdict(f"signed requests to {api} served, every other one refused")
    for name, b, sig, served in cases:
        status = call(api.rstrip("/") + CHAT, b, {**auth, **sig})
        if served:
            v.add(name, "2xx", status, 200 <= status < 300,
                  "" if 200 <= status < 300 else "the control failed: the refusals below prove nothing")
        else:
            v.add(name, "401 or 403", status, status in REFUSED)
    return v
