"""The secrets no attachment may show: registered once (an admin token, an API key, an Environment's secrets),
blanked in every text the report writes."""
from __future__ import annotations

import threading

REDACTED = "***"
_secrets: set[str] = set()
_secrets_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Never let `value` appear in an attachment (values shorter than 4 chars are ignored)."""
    if value and len(value) >= 4:
        with _secrets_lock:
            _secrets.add(value)


def redact(text: str) -> str:
    """`text` with every registered secret replaced by ***."""
    with _secrets_lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for s in secrets:
        text = text.replace(s, REDACTED)
    return text
