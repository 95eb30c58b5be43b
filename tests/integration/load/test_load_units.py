"""Pure parts of the load package: SSE metering, workloads, pacing, config, stats."""
from __future__ import annotations

import json

import pytest

from chaos.errors import ConfigError, LoadError
from chaos.load.config import LoadConfig, from_environ
from chaos.load.pacing import ArrivalSchedule, poisson_offsets
from chaos.load.records import RequestRecord
from chaos.load.runner import make_config, read_dir
from chaos.load.sse import StreamMeter
from chaos.load.stats import percentile, summarize
from chaos.load.workloads import (
    MixWorkload,
    body,
    count_tokens,
    long_context_burst,
    make_workload,
    shared_prefix_set,
    special_corpus,
)


def _chat(content, model="m", finish=None):
    return ("data: " + json.dumps({"model": model, "choices": [{"delta": content, "finish_reason": finish}]})).encode()


def test_meter_ignores_empty_first_chunk_and_keeps_raw_gaps():
    m = StreamMeter(t0=10.0)
    m.feed(_chat({"role": "assistant", "content": ""}), 10.1)
    m.feed(b"", 10.15)
    m.feed(_chat({"content": "a"}), 10.3)
    m.feed(_chat({"content": "b"}), 10.4)
    m.feed(_chat({"content": "c"}, finish="stop"), 10.6)
    m.feed(b'data: {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3}}', 10.61)
    assert m.feed(b"data: [DONE]", 10.62) is True
    r = RequestRecord("x", 1, 0.0)
    m.fill(r, 10.62)
    assert r.ttft == pytest.approx(0.3) and r.e2e == pytest.approx(0.62)
    assert r.gaps == pytest.approx([0.1, 0.2])
    assert (r.output_tokens, r.prompt_tokens, r.model_answered) == (3, 9, "m")
    assert r.tpot == pytest.approx((0.62 - 0.3) / 2)


def test_meter_completions_text_and_error_chunk():
    m = StreamMeter(0.0)
    m.feed(b'data: {"model": "m", "choices": [{"text": "hi"}]}', 1.0)
    m.feed(b'data: {"error": {"message": "boom", "code": 500}}', 2.0)
    assert m.error and "boom" in m.error and m.first == 1.0 and not m.done


def test_token_counting_rule_and_class_sizes():
    assert count_tokens("Hello, world!") == 4 and count_tokens("abcdefghij") == 2
    assert count_tokens("👨‍👩‍👧") == 5  # 3 emoji code points + 2 ZWJ (the simulator's rule)
    from chaos.stack.sim.tokenizer import tokenize

    sample = MixWorkload(seed=9, classes={"short": 50, "long": 60, "xl": 70}).next().text + " é, 中文 🚀!"
    assert count_tokens(sample) == len(tokenize(sample))
    w = MixWorkload(classes={"short": 100, "long": 400, "xl": 800}, seed=1)
    seen = {}
    for _ in range(300):
        p = w.next()
        seen.setdefault(p.prompt_class, []).append(p)
        assert p.tokens == count_tokens(p.text)
    for cls, size in {"short": 100, "long": 400, "xl": 800}.items():
        assert all(p.tokens == size for p in seen[cls]), cls
        assert all(abs(len(p.text.split()) - size) <= 1 for p in seen[cls])
    share = len(seen["short"]) / 300
    assert 0.6 < share < 0.8  # 7:2:1
    assert len({p.text for ps in seen.values() for p in ps}) == 300


def test_mix_is_seeded_and_validated():
    a = [MixWorkload(seed=5, classes={"short": 8, "long": 8, "xl": 8}).next().prompt_class for _ in range(20)]
    b = [MixWorkload(seed=5, classes={"short": 8, "long": 8, "xl": 8}).next().prompt_class for _ in range(20)]
    assert a == b
    with pytest.raises(ConfigError, match="unknown prompt classes"):
        MixWorkload(mix={"huge": 1})
    with pytest.raises(ConfigError, match="non-negative"):
        MixWorkload(mix={"short": 0})


def test_burst_and_shared_prefix_sets():
    burst = long_context_burst(100, tokens=1000)
    ps = [burst.next() for _ in range(101)]
    assert ps[-1] is None and all(p.prompt_class == "xl" and abs(p.tokens - 1000) <= 2 for p in ps[:100])
    s = shared_prefix_set(1000, prefixes=4, prefix_tokens=200, suffix_tokens=20, seed=2)
    assert len(s) == 1000
    by = {}
    for p in s.prompts:
        by.setdefault(p.prompt_class, set()).add(p.text[: 200 * 4 - 1])
    assert set(by) == {f"prefix-{k}" for k in range(4)} and all(len(v) == 1 for v in by.values())
    assert len({p.text for p in s.prompts}) == 1000


def test_special_corpus_has_what_the_input_suite_needs():
    rows = special_corpus()
    feats = {f for r in rows for f in r["features"]}
    assert {"emoji", "zwj", "combining", "rtl", "cjk"} <= feats
    emoji = [r for r in rows if r["name"] == "emoji-dense"][0]["text"]
    assert sum(1 for ch in emoji if ord(ch) >= 0x1F300) > 15
    text = "".join(r["text"] for r in rows)
    assert "\u200d" in text and "\u0301" in text and "\u0645" in text and "\u4f60" in text
    assert make_workload("special").next().prompt_class == "special"


def test_body_chat_and_completions():
    from chaos.load.workloads import Prompt

    p = Prompt("short", "héllo 👋", 2)
    chat = json.loads(body(p, api="chat", model="m", max_tokens=5))
    assert chat["messages"][0]["content"] == "héllo 👋" and chat["stream_options"] == {"include_usage": True}
    comp = json.loads(body(p, api="completions", model="m", max_tokens=5, stream=False))
    assert comp["prompt"] == "héllo 👋" and "stream_options" not in comp


def test_poisson_schedule_is_seeded_and_does_not_drift():
    offs = poisson_offsets(200, 10.0, seed=4)
    assert offs == poisson_offsets(200, 10.0, seed=4)
    assert 1800 < len(offs) < 2200 and offs == sorted(offs)
    now = [100.0]
    sched = ArrivalSchedule(offs, clock=lambda: now[0])
    assert sched.delay() == pytest.approx(offs[0])
    now[0] = 100.0 + 5.0  # far behind: late arrivals are due now, the schedule does not shift
    late = [sched.delay() for _ in range(3)]
    assert late == [0.0, 0.0, 0.0]
    nxt = sched.next_slot()
    assert nxt == pytest.approx(100.0 + offs[4])


def test_config_from_environment(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"model": "x", "users": 3}))
    cfg = from_environ({"CHAOS_LOAD_CONFIG": str(p), "CHAOS_LOAD_MAX_TOKENS": "64",
                        "CHAOS_LOAD_MIX": '{"short": 1}', "CHAOS_LOAD_OUT_DIR": "/tmp/o"})
    assert (cfg.model, cfg.users, cfg.max_tokens, cfg.mix, cfg.out_dir) == ("x", 3, 64, {"short": 1}, "/tmp/o")
    p.write_text(json.dumps({"shape": "zigzag"}))
    with pytest.raises(ConfigError, match="shape"):
        from_environ({"CHAOS_LOAD_CONFIG": str(p)})
    p.write_text(json.dumps({"bogus": 1}))
    with pytest.raises(ConfigError, match="bogus"):
        from_environ({"CHAOS_LOAD_CONFIG": str(p)})
    with pytest.raises(ConfigError, match="CHAOS_LOAD_USERS"):
        from_environ({"CHAOS_LOAD_USERS": "many"})
    with pytest.raises(ConfigError, match="retry.min_interval_s"):
        make_config(retry_policy={"min_interval_s": 0.1})
    assert make_config(rate=5).shape == "rate" and LoadConfig().validate().shape == "users"


def _rec(cls, ttft, e2e, tpot=None, error=None, final=True, t=0.0):
    return RequestRecord("r", 1, t, ttft=ttft, e2e=e2e, tpot=tpot, error=error, prompt_class=cls, final=final,
                         outcome="succeeded" if error is None else "failed")


def test_stats_from_raw_records():
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([], 99) is None
    recs = [_rec("short", 0.01 * i, 0.1 + 0.01 * i, t=i * 0.1) for i in range(1, 101)]
    recs += [_rec("xl", 1.0, 5.0, t=1.0), _rec("xl", None, 0.2, error="reset", t=2.0)]
    st = summarize(recs, slos={"short": {"ttft_p99_s": 0.5, "e2e_p99_s": 10}, "xl": {"ttft_p99_s": 2, "e2e_p99_s": 4}})
    assert st.classes["short"].get("ttft", 50) == pytest.approx(0.505)
    assert st.classes["short"].get("ttft", 99) == pytest.approx(0.9901)
    assert st.classes["xl"].errors == {"reset": 1} and st.all.attempts == 102
    assert st.classes["short"].goodput_n == 50 and st.classes["xl"].goodput_n == 0
    assert st.goodput_per_s == pytest.approx(50 / st.window_s)
    assert st.outcomes == {"succeeded": 101, "failed": 1}
    assert st.table()[0][0] == "short"


def test_read_dir_live_skips_partial_line(tmp_path):
    r = RequestRecord("a", 1, 1.0)
    (tmp_path / "records-h-1.jsonl").write_text(r.to_json() + "\n" + r.to_json()[:10])
    assert len(read_dir(tmp_path, live=True)) == 1
    with pytest.raises(LoadError, match="records-h-1.jsonl:2"):
        read_dir(tmp_path)


def test_importing_chaos_load_does_not_import_locust():
    import subprocess
    import sys

    code = "import sys, chaos.load, chaos.observe; print('locust' in sys.modules, 'gevent' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "False"], out.stderr


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_meter_fast_path_agrees_with_json(api):
    import random

    rng = random.Random(7)
    texts = ["", "a", ' "text": "x', "\\n", "é👋", "", 'say "content": ""', "null", " "]
    lines, expect = [], []
    for i in range(200):
        t = rng.choice(texts)
        piece = {"delta": {"content": t}} if api == "chat" else {"text": t}
        sep = (", ", ": ") if i % 2 else (",", ":")
        lines.append(b"data: " + json.dumps({"model": "m", "choices": [{"index": 0, **piece}]},
                                             separators=sep).encode())
        expect.append(bool(t))
    m = StreamMeter(0.0)
    for i, line in enumerate(lines):
        m.feed(line, float(i))
    assert m.events == sum(expect)
    assert m.first == float(expect.index(True))
    assert len(m.gaps) == sum(expect) - 1
