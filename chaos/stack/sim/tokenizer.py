"""The simulator's deterministic tokenizer and text generator.

Tokenizer: a token is a run of up to 8 word characters (`\\w`, any script), or any single other
non-space character (punctuation, symbol, each emoji code point). Whitespace is free. So
"Hello, world!" is 4 tokens and a 512-token prompt is about 512 short words. Prompt-length
errors and `usage.prompt_tokens` use this count. Chat messages are rendered as
"<|role|> content\\n" per message plus "<|assistant|>" (3 tokens per message + 3).

Output: token i of a request is word `SEQ[(base + i) % len(SEQ)]` where SEQ is a fixed sequence
of vocabulary words drawn from `--seed` and base is a CRC32 of the prompt; text is the words
joined with a leading space each (" the quick ..."). Natural length (finish_reason "stop"
unless max_tokens comes first): 64..511 tokens, also from the prompt hash.

Tokenizer crash (fault `tokenizer-crash`, the seed incident): a prompt with more than 15 emoji
that is not in Unicode NFC form kills the engine (as vLLM's detokenizer crashes did). NFC or
NFKC normalization in front of the server (the gateway's fix) makes the same text harmless.
"""
from __future__ import annotations

import random
import re
import unicodedata
import zlib
from typing import Any

_TOKEN_RE = re.compile(r"\w{1,8}|[^\w\s]")

VOCAB = (
    "the of and to in is that for it as with was on be by this are at from or an which "
    "model token cache batch engine request stream latency block prefix rank signal graph "
    "river stone light window garden market quiet rapid silver north morning paper number "
    "system value result simple method query answer reason order field level point change"
).split()

_SEQ_LEN = 4099  # prime, so bases spread evenly


def tokenize(text: str) -> list[str]:
    """Split text into the simulator's tokens (see module docstring)."""
    return _TOKEN_RE.findall(text)


def render_chat(messages: list[dict[str, Any]]) -> str:
    """Flatten chat messages into one prompt string (a simple chat template)."""
    parts = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        parts.append(f"<|{m.get('role', 'user')}|> {content or ''}\n")
    parts.append("<|assistant|>")
    return "".join(parts)


class TextGenerator:
    """Deterministic output words for a request, from --seed and the prompt."""

    def __init__(self, seed: int = 0) -> None:
        rng = random.Random(seed)
        self.words = [" " + rng.choice(VOCAB) for _ in range(_SEQ_LEN)]

    @staticmethod
    def base_for(prompt_tokens: list[str]) -> int:
        """Stable per-prompt offset into the word sequence."""
        return zlib.crc32("\x1f".join(prompt_tokens[-64:]).encode("utf-8", "replace")) & 0x7FFFFFFF

    def token(self, base: int, i: int) -> str:
        return self.words[(base + i) % _SEQ_LEN]

    @staticmethod
    def natural_length(base: int) -> int:
        """Where the model would emit EOS for this prompt."""
        return 64 + (base * 2654435761 >> 7) % 448


def _is_emoji(ch: str) -> bool:
    cp = ord(ch)
    return (0x1F000 <= cp <= 0x1FAFF or 0x2600 <= cp <= 0x27BF or 0x2B00 <= cp <= 0x2BFF
            or 0x1F900 <= cp <= 0x1F9FF)


def count_emoji(text: str) -> int:
    return sum(1 for ch in text if _is_emoji(ch))


def crashes_tokenizer(text: str, threshold: int = 15) -> bool:
    """The seed incident: more than `threshold` emoji in text that is not NFC-normalized."""
    return count_emoji(text) > threshold and not unicodedata.is_normalized("NFC", text)
