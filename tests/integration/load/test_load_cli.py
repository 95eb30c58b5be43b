"""`chaos load --env X` end to end against the purpose-built server."""
from __future__ import annotations

from chaos.cli import main


def _env(tmp_path, url):
    p = tmp_path / "env.yaml"
    p.write_text("name: t\n"
                 f"endpoints: {{api: '{url}', model: sim-model}}\n"
                 "load: {users: 2, duration_s: 1.5, max_tokens: 4}\n")
    return p


def test_chaos_load_runs_and_prints_table(sse_server, tmp_path, capsys):
    env = _env(tmp_path, sse_server.url)
    rc = main(["load", "--env", str(env), "--classes", "short=16,long=32,xl=64", "--out", str(tmp_path / "o")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "goodput" in out and "short" in out
    assert list((tmp_path / "o").glob("*/records-*.jsonl"))


def test_chaos_load_bad_flag_is_one_line(sse_server, tmp_path, capsys):
    env = _env(tmp_path, sse_server.url)
    rc = main(["load", "--env", str(env), "--classes", "short=big", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--classes" in err
