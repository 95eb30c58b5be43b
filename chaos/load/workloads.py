"""Workloads: prompt-length classes and their mix, the long-context burst, the shared-prefix set
and the special-character corpus.

How prompt tokens are counted: exactly as the simulator does (chaos.stack.sim.tokenizer): a token
is a run of up to 8 word characters (any script) or any single other non-space character (each
emoji code point, each punctuation mark). Generated prompts are 3-letter words, so one word is one
token (and about 4 characters, the usual rule of thumb for real tokenizers). Chat templates add a
few tokens server-side (the simulator: 3 per message + 3), which `usage.prompt_tokens` reports.
Class sizes are configurable (`classes`): an embedded stack may run with a max-model-len below 32k.
"""
from __future__ import annotations

import itertools
import json
import random
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos.errors import ConfigError

DEFAULT_CLASSES = {"short": 512, "long": 8192, "xl": 32768}
DEFAULT_MIX = {"short": 7.0, "long": 2.0, "xl": 1.0}
# package data (pyproject's package-data), not the clone's fixtures/: the default mix sends 5 % of it, and from
# a wheel alone the corpus under fixtures/ was missing, so the Locust process died at its start and no load flowed
SPECIAL_CORPUS = Path(__file__).resolve().parent / "data" / "special_chars.jsonl"
WORKLOADS = ("mix", "burst", "shared_prefix", "special", "file")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


_TOKEN_RE = re.compile(r"\w{1,8}|[^\w\s]")  # the simulator's rule (chaos/stack/sim/tokenizer.py)


def count_tokens(text: str) -> int:
    """Tokens of `text` under the simulator's rule (see the module docstring)."""
    return len(_TOKEN_RE.findall(text))


def words(n_tokens: int, rng: random.Random) -> str:
    """`n_tokens` 3-letter words (4 characters each with the space)."""
    return " ".join("".join(rng.choices(_LETTERS, k=3)) for _ in range(n_tokens))


@dataclass(frozen=True)
class Prompt:
    """One prompt to send: its class, text and counted tokens (and, in a fixed prompt set, its name)."""

    prompt_class: str
    text: str
    tokens: int
    key: str | None = None


def body(prompt: Prompt, *, api: str, model: str, max_tokens: int, stream: bool = True,
         ignore_eos: bool = False, temperature: float | None = None, seed: int | None = None) -> bytes:
    """The JSON body of an OpenAI-compatible chat or completions request."""
    d: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "stream": stream}
    if temperature is not None:
        d["temperature"] = temperature
    if seed is not None:  # vLLM's sampling seed: with temperature 0 the answer is the greedy one either way
        d["seed"] = seed
    if ignore_eos:  # a vLLM extension: fixed-length answers, as `vllm bench serve --ignore-eos` sends
        d["ignore_eos"] = True
    if api == "chat":
        d["messages"] = [{"role": "user", "content": prompt.text}]
    else:
        d["prompt"] = prompt.text
    if stream:
        d["stream_options"] = {"include_usage": True}
    return json.dumps(d, ensure_ascii=False).encode("utf-8")


def body_maker(*, api: str, model: str, max_tokens: int, stream: bool = True, ignore_eos: bool = False,
               temperature: float | None = None, seed: int | None = None) -> Callable[[Prompt], bytes]:
    """`body` for one configuration, as a function of the prompt: the same bytes, with only the
    prompt's text encoded per request (the load user sends thousands a second)."""
    mark = "\x00prompt\x00"
    whole = body(Prompt("", mark, 0), api=api, model=model, max_tokens=max_tokens, stream=stream,
                 ignore_eos=ignore_eos, temperature=temperature, seed=seed)
    quoted = json.dumps(mark, ensure_ascii=False).encode("utf-8")
    parts = whole.split(quoted)
    if len(parts) != 2:  # the mark elsewhere too (a model named so): encode every body whole
        return lambda prompt: body(prompt, api=api, model=model, max_tokens=max_tokens, stream=stream,
                                   ignore_eos=ignore_eos, temperature=temperature, seed=seed)
    head, tail = parts
    dumps = json.dumps

    def make(prompt: Prompt) -> bytes:
        return head + dumps(prompt.text, ensure_ascii=False).encode("utf-8") + tail

    return make


def _check_mix(mix: dict[str, float], classes: dict[str, int]) -> None:
    if not mix or any(w < 0 for w in mix.values()) or sum(mix.values()) <= 0:
        raise ConfigError(f"load mix {mix!r}: expected non-negative weights with a positive sum")
    unknown = sorted(set(mix) - set(classes))
    if unknown:
        raise ConfigError(f"load mix names unknown prompt classes {unknown}; known: {sorted(classes)}")


class MixWorkload:
    """Endless prompts drawn by weight from the classes; each prompt unique (no prefix-cache hits).

    `special_share` of them carry a row of the special-character corpus (emoji-dense, mixed scripts,
    combining marks) at their head, in place of three times as many filler words (a real tokenizer
    spends more tokens on an emoji than the simulator's rule counts), so the class keeps its size.

    `prompt_set` > 0: every prompt is one of a fixed set of that many per class, the same in every
    process (no salt), named `<class>-<k>`: the answers verdict needs each prompt asked again after
    the fault. Their distinct part is at their end (the simulator answers from a prompt's last tokens)."""

    def __init__(self, mix: dict[str, float] | None = None, classes: dict[str, int] | None = None,
                 seed: int = 0, special_share: float = 0.0, prompt_set: int = 0) -> None:
        if prompt_set < 0:
            raise ConfigError(f"load 'answers': expected a prompt-set size >= 0, got {prompt_set!r}")
        self.prompt_set = prompt_set
        if not 0.0 <= special_share <= 1.0:
            raise ConfigError(f"load 'special_share': expected 0-1, got {special_share!r}")
        self.special_share = special_share
        self.special = [str(r["text"]) for r in special_corpus()] if special_share > 0 else []
        self.classes = dict(classes or DEFAULT_CLASSES)
        self.mix = dict(mix or DEFAULT_MIX)
        _check_mix(self.mix, self.classes)
        self.rng = random.Random(seed)
        self._names = [c for c in self.mix if self.mix[c] > 0]
        self._weights = [self.mix[c] for c in self._names]
        self._base: dict[str, tuple[str, int]] = {}
        self._set: dict[str, Prompt] = {}
        self._n = itertools.count()
        self._lock = threading.Lock()
        # differs per process, so workers sharing a seed never send identical (prefix-cached) prompts
        self.salt = f"{random.SystemRandom().getrandbits(32):08x}"

    def _base_text(self, cls: str) -> tuple[str, int]:
        if cls not in self._base:
            # the unique head takes 2 tokens; the rest is shared filler generated (and counted) once
            text = words(max(1, self.classes[cls] - 2), random.Random(f"{cls}"))
            self._base[cls] = (text, count_tokens(text))
        return self._base[cls]

    def _set_prompt(self, cls: str, k: int) -> Prompt:
        """Prompt k of the class's fixed set (made once); the first `special_share` of the set carry a corpus row."""
        key = f"{cls}-{k}"
        if key not in self._set:
            base, n = self._base_text(cls)
            if k < round(self.special_share * self.prompt_set):
                head = self.special[k % len(self.special)]
                keep = base.split(" ")[:max(1, n - 3 * count_tokens(head))]
                text = f"{head} {' '.join(keep)} {k:03x} set"
                self._set[key] = Prompt(cls, text, count_tokens(text), key=key)
            else:
                self._set[key] = Prompt(cls, f"{base} {k:03x} set", n + 2, key=key)
        return self._set[key]

    def next(self) -> Prompt | None:
        with self._lock:
            cls = self.rng.choices(self._names, self._weights)[0]
            if self.prompt_set:
                return self._set_prompt(cls, self.rng.randrange(self.prompt_set))
            i = next(self._n)
            base, n = self._base_text(cls)
            if self.special and self.rng.random() < self.special_share:
                head = self.special[i % len(self.special)]
                keep = base.split(" ")[:max(1, n - 3 * count_tokens(head))]
                text = f"{i:03x} {self.salt} {head} {' '.join(keep)}"
                return Prompt(cls, text, count_tokens(text))
            text = f"{i:03x} {self.salt} {base}"
        return Prompt(cls, text, n + 2)  # the hex counter and the salt: one token each (<= 8 chars)


class ListWorkload:
    """A finite sequence of prompts; `next()` returns None once exhausted."""

    def __init__(self, prompts: list[Prompt]) -> None:
        self.prompts = prompts
        self._it: Iterator[Prompt] = iter(prompts)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.prompts)

    def next(self) -> Prompt | None:
        with self._lock:
            return next(self._it, None)

    def share(self, index: int, of: int) -> None:
        """Keep only this worker's share (every `of`-th prompt from `index`): workers that build the
        same list from the same seed then send it once between them, not once each."""
        with self._lock:
            self.prompts = self.prompts[index::of]
            self._it = iter(self.prompts)


def long_context_burst(n: int = 100, tokens: int = DEFAULT_CLASSES["xl"], seed: int = 0) -> ListWorkload:
    """`n` consecutive xl prompts (distinct heads, so no prefix-cache shortcut)."""
    filler = words(tokens - 2, random.Random(seed))
    # the filler is counted once (tokens never span the space after the head): counting each whole prompt took
    # 25 s for a 5000-prompt burst, longer than a scenario's steady state waits for its load to flow
    filler_tokens = count_tokens(filler)
    prompts = []
    for i in range(n):
        head = f"{i:03x} burst"
        prompts.append(Prompt("xl", f"{head} {filler}", count_tokens(head) + filler_tokens))
    return ListWorkload(prompts)


def shared_prefix_set(n: int = 1000, prefixes: int = 4, prefix_tokens: int = 2048,
                      suffix_tokens: int = 64, seed: int = 0) -> ListWorkload:
    """`n` prompts over a handful of shared prefixes; class name `prefix-<k>`; shuffled, seeded."""
    if prefixes < 1 or n < 1:
        raise ConfigError(f"shared-prefix set: need n >= 1 and prefixes >= 1, got n={n} prefixes={prefixes}")
    rng = random.Random(seed)
    heads = [words(prefix_tokens, random.Random(f"prefix-{seed}-{k}")) for k in range(prefixes)]
    prompts = []
    for _ in range(n):
        k = rng.randrange(prefixes)
        text = f"{heads[k]} {words(suffix_tokens, rng)}"
        prompts.append(Prompt(f"prefix-{k}", text, count_tokens(text)))
    return ListWorkload(prompts)


def special_corpus(path: str | Path = SPECIAL_CORPUS) -> list[dict[str, Any]]:
    """The special-character corpus rows: {name, features, text}."""
    p = Path(path)
    try:
        rows = [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError) as e:
        raise ConfigError(f"{p}: cannot read special-character corpus: {e}") from None
    for i, r in enumerate(rows, 1):
        if not isinstance(r, dict) or not isinstance(r.get("text"), str):
            raise ConfigError(f"{p}:{i}: expected an object with a 'text' string")
    return rows


class SpecialWorkload:
    """Cycles through the special-character corpus; class name `special`."""

    def __init__(self, path: str | Path = SPECIAL_CORPUS) -> None:
        self.rows = special_corpus(path)
        self._it = itertools.cycle(self.rows)
        self._lock = threading.Lock()

    def next(self) -> Prompt | None:
        with self._lock:
            text = next(self._it)["text"]
        return Prompt("special", text, count_tokens(text))


def prompts_file(path: str | Path, n: int | None = None) -> ListWorkload:
    """The prompts of a JSONL file, in order ({"prompt": text, "class": optional name} per line: the
    format of `vllm bench serve --dataset-name custom`, so both tools can send the same prompts)."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: cannot read prompts file: {e}") from None
    prompts = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise ConfigError(f"{p}:{i}: expected one JSON object per line") from None
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
            raise ConfigError(f"{p}:{i}: expected an object with a 'prompt' string")
        prompts.append(Prompt(str(row.get("class", "file")), row["prompt"], count_tokens(row["prompt"])))
    if not prompts:
        raise ConfigError(f"{p}: no prompts in the file")
    return ListWorkload(prompts[:n] if n else prompts)


def make_workload(kind: str, *, mix: dict[str, float] | None = None, classes: dict[str, int] | None = None,
                  seed: int = 0, n: int | None = None, prefixes: int = 4,
                  path: str | Path | None = None, special_share: float = 0.0,
                  prompt_set: int = 0) -> MixWorkload | ListWorkload | SpecialWorkload:
    """Build a workload by name (mix | burst | shared_prefix | special | file); `prompt_set`: MixWorkload's."""
    cls = dict(classes or DEFAULT_CLASSES)
    if kind == "file":
        if path is None:
            raise ConfigError("workload 'file' needs a prompts file")
        return prompts_file(path, n)
    if kind == "mix":
        return MixWorkload(mix, cls, seed, special_share, prompt_set)
    if kind == "burst":
        return long_context_burst(n or 100, cls.get("xl", DEFAULT_CLASSES["xl"]), seed)
    if kind == "shared_prefix":
        return shared_prefix_set(n or 1000, prefixes, prefix_tokens=cls.get("short", 512) * 4, seed=seed)
    if kind == "special":
        return SpecialWorkload()
    raise ConfigError(f"unknown workload {kind!r}; expected one of {', '.join(WORKLOADS)}")
