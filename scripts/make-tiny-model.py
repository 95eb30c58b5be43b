#!/usr/bin/env python3
"""Builds a tiny random-weight Llama for real vLLM into .tools/vllm/models/tiny-llama/.

Offline and deterministic: the weights come from a seed, the tokenizer is a byte-level BPE trained
with `tokenizers` on a frozen text the repo ships (fixtures/data/tiny-model-corpus.txt: its docs as of
the day the model was made). The same seed and the
same corpus give byte-identical files; a second run with the same inputs is skipped.

Runs with the vLLM venv's python (.tools/vllm/venv, made by scripts/setup-vllm.sh), which has
transformers and tokenizers; started with another python, it re-executes itself with that one.

    .tools/vllm/venv/bin/python scripts/make-tiny-model.py [--seed 0] [--out DIR] [--force]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / ".tools" / "vllm"
VENV_PY = BASE / "venv" / "bin" / "python"
DEFAULT_OUT = BASE / "models" / "tiny-llama"
RECIPE = 1  # bump when the recipe below changes

# every cache inside .tools/vllm, and no network of any kind
os.environ.update(
    HF_HUB_OFFLINE="1",
    TRANSFORMERS_OFFLINE="1",
    HF_DATASETS_OFFLINE="1",
    HF_HUB_DISABLE_TELEMETRY="1",
    HF_HOME=str(BASE / "cache" / "hf"),
    XDG_CACHE_HOME=str(BASE / "cache" / "xdg"),
    TORCHINDUCTOR_CACHE_DIR=str(BASE / "cache" / "inductor"),
    TOKENIZERS_PARALLELISM="false",
)

SPECIAL = ["<unk>", "<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}"
    "{% endif %}"
    "{{ '<|end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)
MODEL = dict(
    hidden_size=256,
    intermediate_size=512,
    num_hidden_layers=4,
    num_attention_heads=4,  # head size 64: the CPU attention kernel rejects head sizes under 32
    num_key_value_heads=2,
    max_position_embeddings=8192,
    rope_theta=10000.0,
    rms_norm_eps=1e-5,
    hidden_act="silu",
    initializer_range=0.02,
    tie_word_embeddings=False,
)


def fail(msg: str) -> None:
    print(f"make-tiny-model: {msg}", file=sys.stderr)
    sys.exit(1)


CORPUS = ROOT / "fixtures" / "data" / "tiny-model-corpus.txt"  # frozen: editing the docs must not change the model


def corpus_files() -> list[Path]:
    if not CORPUS.is_file():
        fail(f"{CORPUS} is missing: the tokenizer is trained on it")
    return [CORPUS]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab-size", type=int, default=3072)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--force", action="store_true", help="rebuild even when the inputs did not change")
    args = ap.parse_args()

    try:
        import tokenizers  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        if VENV_PY.exists() and Path(sys.prefix).resolve() != VENV_PY.parent.parent.resolve():
            os.execv(str(VENV_PY), [str(VENV_PY), __file__, *sys.argv[1:]])
        fail(f"transformers/tokenizers not importable; run scripts/setup-vllm.sh first (python: {sys.executable})")

    start = time.monotonic()
    files = corpus_files()
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in files]
    digest = hashlib.sha256()
    for p, t in zip(files, texts, strict=True):
        digest.update(str(p.relative_to(ROOT)).encode() + b"\0" + t.encode() + b"\0")
    inputs = {
        "recipe": RECIPE,
        "seed": args.seed,
        "vocab_size": args.vocab_size,
        "corpus_sha256": digest.hexdigest(),
        "corpus_files": [str(p.relative_to(ROOT)) for p in files],
        "model": MODEL,
    }
    out: Path = args.out
    info_path = out / "build-info.json"
    if not args.force and info_path.exists():
        try:
            if json.loads(info_path.read_text()).get("inputs") == inputs:
                print(f"make-tiny-model: {out} is up to date (seed {args.seed})")
                return
        except ValueError:
            pass

    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    # 1. tokenizer: byte-level BPE (every input encodes; nothing maps to <unk>)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=args.vocab_size,
        min_frequency=1,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        additional_special_tokens=SPECIAL[4:],
        model_max_length=MODEL["max_position_embeddings"],
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    vocab = len(fast)

    # 2. model: random weights from the seed
    ids = {t: fast.convert_tokens_to_ids(t) for t in ("<s>", "</s>", "<pad>")}
    config = LlamaConfig(
        vocab_size=vocab,
        bos_token_id=ids["<s>"],
        eos_token_id=ids["</s>"],
        pad_token_id=ids["<pad>"],
        **MODEL,
    )
    config.dtype = "bfloat16"
    torch.manual_seed(args.seed)
    model = LlamaForCausalLM(config).to(torch.bfloat16).eval()

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp, safe_serialization=True)
    fast.save_pretrained(tmp)
    GenerationConfig(
        bos_token_id=ids["<s>"], eos_token_id=ids["</s>"], pad_token_id=ids["<pad>"]
    ).save_pretrained(tmp)
    # the chat template also inside tokenizer_config.json (transformers 5 writes it to
    # chat_template.jinja only), and a class name that older transformers know too
    tc_path = tmp / "tokenizer_config.json"
    tc = json.loads(tc_path.read_text())
    tc["tokenizer_class"] = "PreTrainedTokenizerFast"
    tc["chat_template"] = CHAT_TEMPLATE
    tc_path.write_text(json.dumps(tc, indent=2) + "\n")
    params = sum(p.numel() for p in model.parameters())
    info = {
        "inputs": inputs,
        "vocab": vocab,
        "parameters": params,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "tokenizers": tokenizers.__version__},
    }
    (tmp / "build-info.json").write_text(json.dumps(info, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    size = sum(p.stat().st_size for p in out.iterdir())
    print(
        f"make-tiny-model: built {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out} "
        f"(seed {args.seed}, {params / 1e6:.2f}M parameters, vocab {vocab}, "
        f"{len(files)} corpus files, {size / 1e6:.1f} MB) in {time.monotonic() - start:.1f}s"
    )


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        fail("interrupted")
    except Exception as e:  # one line, not a traceback
        fail(f"{type(e).__name__}: {e}")
