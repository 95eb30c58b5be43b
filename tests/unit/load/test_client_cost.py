"""The load client's cheaper paths write exactly what the plain ones do: a body from `body_maker` as
from `body`, a record line from `record_line` as from `to_json` (bench/loadgen.py measures the client)."""
from __future__ import annotations

import pytest

from chaos.load.records import RequestRecord, record_line
from chaos.load.workloads import MixWorkload, Prompt, body, body_maker, special_corpus


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_body_maker_writes_the_bytes_body_writes(api):
    texts = [MixWorkload(seed=1).next().text, 'say "hi"\n\t\\ é👋 \x00prompt\x00', ""]
    texts += [str(r["text"]) for r in special_corpus()]
    for stream in (True, False):
        for ignore_eos in (True, False):
            for temperature in (None, 0.0, 0.7):
                for model in ("m", 'x"y', "é", "\x00prompt\x00"):
                    kw = dict(api=api, model=model, max_tokens=7, stream=stream, ignore_eos=ignore_eos,
                              temperature=temperature)
                    make = body_maker(**kw)
                    for text in texts:
                        p = Prompt("c", text, 3)
                        assert make(p) == body(p, **kw)


def test_record_line_is_to_json():
    recs = [RequestRecord("r", 1, 1.5),
            RequestRecord("r", 2, 1.5, ttft=0.1, e2e=0.3, tpot=0.01, gaps=[0.01, 1e-9], prompt_tokens=3,
                          output_tokens=16, status=200, error="http", error_detail='a "quoted" é\n',
                          model_asked="m", model_answered="n", served_by="b", prompt_class="short",
                          final=False, outcome="failed", finish_reason="length", attrs={"x-region": "eu"},
                          stream_order="proven")]
    for r in recs:
        assert record_line(r) == r.to_json()
