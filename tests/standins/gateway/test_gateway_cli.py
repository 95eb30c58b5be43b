"""`chaos gateway`: settings from an environment or flags; bad input and unreachable admin are one line."""

from chaos.cli import main
from chaos.commands.gateway import settings_from
from chaos.env import load
from chaos.stack.gateway import STATE_CODES, State
from tests._support import free_port


def test_settings_from_local_env_route_through_toxiproxy():
    env = load("local")
    s = settings_from(env)
    assert s.listen == env.gateway.listen and s.admin_token == env.gateway.admin_token
    pools = {r.name: (r.pool, r.url) for r in s.replicas}
    assert pools["replica-c"] == ("canary", "http://127.0.0.1:18012")
    assert pools["replica-a"] == ("stable", "http://127.0.0.1:18010")
    assert s.policy.min_calls == env.breaker.min_calls and s.hmac_key is None


def test_flags_override_and_name_replicas():
    s = settings_from(None, stable=["a=127.0.0.1:9001"], canary=["http://127.0.0.1:9002/"], canary_weight=0.5,
                      normalize_unicode=False, listen="127.0.0.1:9100")
    assert [(r.name, r.url, r.pool) for r in s.replicas] == [
        ("a", "http://127.0.0.1:9001", "stable"), ("canary-1", "http://127.0.0.1:9002", "canary")]
    assert s.policy.canary_weight == 0.5 and s.policy.normalize_unicode is False


def test_bad_flags_and_missing_key_are_one_line(capsys, monkeypatch):
    assert main(["gateway", "--stable", "ftp://x"]) == 2
    assert main(["gateway", "--stable", "http://127.0.0.1:1", "--listen", "nonsense"]) == 2
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    assert main(["gateway", "--stable", "http://127.0.0.1:1", "--hmac-key-env", "NO_SUCH_KEY_VAR"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("chaos: error: ") for line in err)
    assert "--stable" in err[0] and "listen" in err[1] and "NO_SUCH_KEY_VAR" in err[2]
    assert "Traceback" not in "".join(err)


def test_reset_against_nothing_is_one_line(capsys):
    port = free_port()
    assert main(["gateway", "reset", "--url", f"http://127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("chaos: error: gateway admin") and "\n" not in err


def test_state_encoding_is_documented_order():
    assert [STATE_CODES[s] for s in (State.CLOSED, State.HALF_OPEN, State.OPEN, State.FORCED_OPEN)] == [0, 1, 2, 3]


def test_python_m_gateway_runs_and_reset_reaches_it(capsys, monkeypatch):
    monkeypatch.delenv("CHAOS_GATEWAY_TOKEN", raising=False)
    import subprocess
    import sys
    import time
    import urllib.request

    port = free_port()
    env = {"CHAOS_GATEWAY_TOKEN": "tok-cli", "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen([sys.executable, "-m", "chaos.stack.gateway", "--listen", f"127.0.0.1:{port}",
                             "--stable", "http://127.0.0.1:1", "--canary", "c=http://127.0.0.1:2"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                urllib.request.urlopen(url + "/gateway/health", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        assert main(["gateway", "reset", "--url", url]) == 2          # no token: 401
        assert "HTTP 401" in capsys.readouterr().err
        assert main(["gateway", "reset", "--url", url, "--token", "tok-cli", "--pool", "canary"]) == 0
        assert capsys.readouterr().out.strip() == "stable=closed canary=closed"
    finally:
        proc.terminate()
        out = proc.communicate(timeout=10)[0].decode()
    assert "tok-cli" not in out
