"""The greedy load's answers: a stream's digest is the digest of the text it showed (however its bytes were
cut into receives, template fast path or not), a whole answer's likewise; the prompt set is one set in every
process; the body asks for greedy, seeded answers."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from chaos.errors import ConfigError
from chaos.load.config import LoadConfig
from chaos.load.records import RequestRecord, answer_digest
from chaos.load.sse import StreamMeter, answer_text
from chaos.load.workloads import MixWorkload, Prompt, body_maker, count_tokens

DATA = Path(__file__).parent / "data"
SIM = (DATA / "sim-completions-16.sse").read_bytes()
CHAT = (DATA / "sim-chat-4.sse").read_bytes()
VLLM = (Path(__file__).parents[2] / "standins/faultproxy/data/vllm-merged-deltas.sse").read_bytes()
ESCAPES = SIM.replace(b'"text":" answer"', '"text":"caf\\u00e9 \\"q\\" 👋"'.encode(), 1)


def shown_text(data: bytes) -> str:
    """The text a client shows: every content chunk's text, parsed as JSON."""
    out = []
    for line in data.split(b"\n"):
        line = line.strip()
        if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
            continue
        choices = json.loads(line[5:]).get("choices") or [{}]
        c = choices[0]
        out.append(c.get("text") if c.get("text") is not None else (c.get("delta") or {}).get("content") or "")
    return "".join(out)


@pytest.mark.parametrize("data", [SIM, CHAT, VLLM, ESCAPES, SIM.replace(b"\n", b"\r\n")],
                         ids=["sim", "chat", "vllm", "escapes", "crlf"])
def test_a_streams_digest_is_its_texts_however_it_was_received(data):
    rng = random.Random(7)
    for _ in range(20):
        meter, pos = StreamMeter(0.0, digest=True), 0
        while pos < len(data):
            n = rng.randint(1, 300)
            meter.receive(data[pos:pos + n], 1.0)
            pos += n
        assert meter.problem() is None
        assert meter.answer() == answer_digest(shown_text(data)) and meter.answer() is not None
    assert StreamMeter(0.0).answer() is None  # not kept unless asked


def test_one_changed_word_changes_the_digest():
    wrong = SIM.replace(b'"text":" answer"', b'"text":"corrupted  answer"', 1)
    a, b = StreamMeter(0.0, digest=True), StreamMeter(0.0, digest=True)
    a.receive(SIM, 1.0)
    b.receive(wrong, 1.0)
    assert a.answer() != b.answer() and b.problem() is None


def test_a_whole_answers_text():
    chat = {"choices": [{"message": {"role": "assistant", "content": "hi there"}}]}
    assert answer_text(chat) == "hi there"
    assert answer_text({"choices": [{"text": " t1 t2"}]}) == " t1 t2"
    assert answer_text({"choices": []}) == answer_text({}) == ""


def test_records_keep_the_digests_through_json():
    r = RequestRecord("r1", 1, 0.0, prompt_key="short-3", answer=answer_digest("x"))
    back = RequestRecord.from_dict(json.loads(r.to_json()))
    assert (back.prompt_key, back.answer) == ("short-3", answer_digest("x")) and len(back.answer or "") == 16


def test_the_prompt_set_is_one_set_in_every_process():
    a = MixWorkload({"short": 1, "long": 1}, {"short": 20, "long": 40}, seed=3, prompt_set=4)
    b = MixWorkload({"short": 1, "long": 1}, {"short": 20, "long": 40}, seed=3, prompt_set=4)
    pa = [a.next() for _ in range(200)]
    pb = [b.next() for _ in range(200)]
    assert [p.text for p in pa if p] == [p.text for p in pb if p]  # no per-process salt
    keys = {p.key: p for p in pa if p}
    assert set(keys) == {f"{c}-{k}" for c in ("short", "long") for k in range(4)}
    assert len({p.text for p in keys.values()}) == 8 and all(p.text.endswith(" set") for p in keys.values())
    assert all(p.tokens == len(p.text.split()) for p in keys.values())  # the simulator's count
    special = MixWorkload({"short": 1}, {"short": 40}, seed=3, prompt_set=4, special_share=0.25)
    heads = {p.key: p for p in (special.next() for _ in range(100)) if p}
    assert heads["short-0"].text.startswith(special.special[0]) and heads["short-0"].tokens == count_tokens(
        heads["short-0"].text) and not any(heads[f"short-{k}"].text.startswith(special.special[0]) for k in (1, 2, 3))
    unique = MixWorkload({"short": 1}, {"short": 20}, seed=3)
    assert unique.next().key is None  # prompt_set 0: every prompt unique, as before


def test_the_body_asks_for_greedy_seeded_answers():
    make = body_maker(api="chat", model="m", max_tokens=4, temperature=0.0, seed=5)
    d = json.loads(make(Prompt("short", "hello", 1)))
    assert d["temperature"] == 0.0 and d["seed"] == 5
    assert "seed" not in json.loads(body_maker(api="chat", model="m", max_tokens=4)(Prompt("s", "h", 1)))


def test_answers_config_is_checked():
    assert LoadConfig(answers=8).validate().answers == 8
    with pytest.raises(ConfigError, match="'answers'"):
        LoadConfig(answers=-1).validate()
    with pytest.raises(ConfigError, match="'temperature'"):
        LoadConfig(answers=8, temperature=0.7).validate()
