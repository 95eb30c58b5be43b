"""NFKC normalization of prompt text before it reaches a tokenizer (seed: emoji-dense text crash)."""
from __future__ import annotations

import json
import unicodedata
from typing import Any


def _nfkc(value: Any) -> Any:
    if isinstance(value, str):
        return unicodedata.normalize("NFKC", value)
    if isinstance(value, list):
        return [_nfkc(v) for v in value]
    return value


def normalize_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """NFKC every prompt string: `prompt` (str or list) and messages[].content (str or text parts)."""
    if "prompt" in payload:
        payload["prompt"] = _nfkc(payload["prompt"])
    for msg in payload.get("messages") or []:
        if not isinstance(msg, dict):
            continue
        content = msg.get("content")
        if isinstance(content, str):
            msg["content"] = _nfkc(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    part["text"] = _nfkc(part["text"])
    return payload


def normalize_body(body: bytes) -> bytes:
    """The request body with prompts normalized; a body that is not a JSON object passes unchanged."""
    if body.isascii() and b"\\u" not in body:
        # plain ASCII text is its own NFKC form: nothing to change, so no JSON parse and re-encode
        # (most requests; the parse was a tenth of the gateway's own time per request)
        return body
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return body
    if not isinstance(payload, dict):
        return body
    return json.dumps(normalize_payload(payload), ensure_ascii=False).encode("utf-8")
