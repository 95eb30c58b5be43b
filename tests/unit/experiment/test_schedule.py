"""Fault schedules: seeded (the same seed draws the same schedule), inside the blast radius (never two
stable replicas down at once), nothing destructive on a protected environment, a file validated with
one-line errors naming file:line and the field, and a hash that names what the schedule does."""
from __future__ import annotations

import pytest

from chaos.env import load
from chaos.errors import ConfigError
from chaos.explore.schedule import DESTRUCTIVE, Schedule, generate, load_schedule

ENV = load("local", environ={})


def test_the_same_seed_draws_the_same_schedule_and_others_differ():
    a, b = generate(ENV, 1), generate(ENV, 1)
    assert a == b and a.key() == b.key()
    keys = {generate(ENV, s).key() for s in range(30)}
    assert len(keys) >= 25  # seeds draw different schedules (a rare coincidence allowed)


def test_at_most_one_stable_replica_is_down_at_a_time():
    stable = {t.name for t in ENV.targets if t.pool == "stable"}
    seen_destructive = 0
    for seed in range(300):
        s = generate(ENV, seed, max_faults=4, horizon_s=40)
        down = [(f.target, f.start_s, f.start_s + max(f.duration_s, 5.0)) for f in s.faults
                if f.kind in DESTRUCTIVE and f.target in stable]
        seen_destructive += len(down)
        for i, (t1, a1, b1) in enumerate(down):
            for t2, a2, b2 in down[i + 1:]:
                assert t1 == t2 or b1 <= a2 or b2 <= a1, (seed, s.faults)
        assert all(f.end_s <= s.horizon_s for f in s.faults)
    assert seen_destructive > 50  # the check above was exercised


def test_on_real_vllm_a_restarted_replica_counts_as_down_for_its_cold_start():
    # a vLLM restart is a cold start (60-165 s here): two stable restarts 7 s apart, fine on the
    # simulator, would put both stable replicas of local-vllm down at once
    env = load("local-vllm", environ={})
    stable = {t.name for t in env.targets if t.pool == "stable"}
    assert env.slas.cold_start_s > 40  # longer than the horizon: any two stable restarts would overlap
    seen_destructive = 0
    for seed in range(200):
        s = generate(env, seed, max_faults=4, horizon_s=40)
        down = {f.target for f in s.faults if f.kind in DESTRUCTIVE and f.target in stable}
        seen_destructive += sum(f.kind in DESTRUCTIVE for f in s.faults)
        assert len(down) <= 1, (seed, s.faults)
    assert seen_destructive > 0  # the check above was exercised


def test_no_jitter_on_a_rank_link():
    links = {p for t in ENV.targets for p in t.rank_proxies}
    assert links and not {f.proxy for seed in range(200) for f in generate(ENV, seed).faults} & links


def test_a_protected_environment_gets_nothing_destructive_unless_allowed():
    protected = ENV.model_copy(update={"safety": ENV.safety.model_copy(update={"protected": True})})
    kinds = {f.kind for seed in range(100) for f in generate(protected, seed).faults}
    assert not kinds & set(DESTRUCTIVE) and kinds
    allowed = {f.kind for seed in range(100) for f in generate(protected, seed, allow_destructive=True).faults}
    assert allowed & set(DESTRUCTIVE)


def test_the_file_round_trips_and_the_hash_ignores_the_seed_and_the_verdict(tmp_path):
    s = generate(ENV, 7)
    path = s.write(tmp_path)
    assert path.name == f"schedule-{s.key()}.yaml"
    again = load_schedule(path)
    assert again == s
    assert again.model_copy(update={"seed": 99, "breaks": "recovery: first_completion_s"}).key() == s.key()


@pytest.mark.parametrize("text, where", [
    ("horizon_s: 60\nfaults:\n  - {kind: restart, target: replica-a, start_s: -1, duration_s: 0}\n",
     ":3: faults[0].start_s: Input should be greater than or equal to 0"),
    ("horizon_s: 60\nfaults:\n  - {kind: restart, start_s: 1, duration_s: 0}\n", ":3: faults[0]: fault restart: name a target"),
    ("horizon_s: 10\nfaults:\n  - {kind: jitter, proxy: client, start_s: 5, duration_s: 8}\n",
     ":3: faults: faults[0] (jitter) ends at 13 s, after horizon_s 10"),
    ("horizon_s: 10\nfaults: []\nsurprise: 1\n", ":2: faults: List should have at least 1 item"),
    ("- just a list\n", ": expected a mapping with 'horizon_s' and 'faults', found list"),
])
def test_a_bad_schedule_file_is_one_line_naming_the_line_and_field(tmp_path, text, where):
    p = tmp_path / "s.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_schedule(p)
    msg = str(caught.value)
    assert where in msg and all(line.startswith(str(p)) for line in msg.splitlines()), msg


def test_an_environment_with_nowhere_to_hurt_is_refused():
    bare = ENV.model_copy(update={"targets": [], "toxiproxy": None, "fault_proxies": []})
    with pytest.raises(ConfigError, match="has a place here"):
        generate(bare, 1)
    assert isinstance(generate(ENV, 3, kinds=("jitter",)), Schedule)
