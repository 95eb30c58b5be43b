"""Fault parameters are checked in one place before anything acts: `chaos fault inject --param` on
every kind of target and in a dry run, game-day plans and explore schedules give the same one line."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chaos import faults
from chaos.cli import main as chaos_main
from chaos.errors import ConfigError
from chaos.experiment.plan import parse_plan
from chaos.explore.schedule import load_schedule
from chaos.faults import http
from chaos.faults.build import HTTP, NETWORK, TARGET
from chaos.faults.ledger import LEDGER_FILE
from chaos.faults.params import SPECS, check
from chaos.faults.proxy_admin import FaultProxyAdmin
from tests._support import REPO

BAD = [  # the cases (signal=KIL: KILL itself is a signal now), and what the one line says
    (["rank-freeze", "--target", "replica-a", "--param", "rnak=1"],
     "fault rank-freeze: unknown parameter 'rnak' (did you mean rank?); it takes rank, tp_rank, pp_rank, dp_rank, pid, seed"),
    (["kill", "--target", "replica-a", "--param", "signal=KIL"],
     "fault kill: parameter signal: expected a signal name or number (KILL, SIGKILL, TERM, 9, ...), got 'KIL'"),
    (["http-error", "--target", "replica-a", "--param", "statu=500"],
     "fault http-error: unknown parameter 'statu' (did you mean status?); it takes status, retry_after, message, "
     "fraction, spread, match, expect_hits, limit, seed"),
    (["http-error", "--target", "replica-a", "--param", "status=abc"],
     "fault http-error: parameter status: expected an integer in [400, 599], got 'abc'"),
]
# a process target, a local Docker one, Docker over SSH (the lab's network-namespace host)
ENVS = ["local", "local-docker", "lab"]


def env_copy(name: str, state_dir: Path) -> Path:
    """The shipped environment file with its state dir (where the ledger lives) moved to `state_dir`."""
    lines = (REPO / "environments" / f"{name}.yaml").read_text(encoding="utf-8").splitlines()
    text = "\n".join(f"state_dir: {state_dir}" if ln.startswith("state_dir:") else ln for ln in lines) + "\n"
    path = state_dir.parent / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("dry_run", [False, True], ids=["inject", "dry-run"])
@pytest.mark.parametrize("env", ENVS)
@pytest.mark.parametrize("args,line", BAD, ids=[b[0][0] + ":" + b[0][-1] for b in BAD])
def test_a_bad_param_is_one_line_exit_2_and_nothing_injected(args, line, env, dry_run, tmp_path, capsys):
    state = tmp_path / "state"
    path = env_copy(env, state)
    argv = ["fault", "inject", *args, "--env", str(path), "--duration", "0", "--allow-destructive"]
    assert chaos_main(argv + (["--dry-run"] if dry_run else [])) == 2
    out, err = capsys.readouterr()
    assert err == f"chaos: error: {line}\n" and out == ""
    assert not (state / LEDGER_FILE).exists(), "the ledger was touched"


def test_the_console_script_says_it_in_one_line_without_a_traceback(tmp_path):
    path = env_copy("local-docker", tmp_path / "state")
    run = subprocess.run([sys.executable, "-m", "chaos.cli", "fault", "inject", "rank-freeze", "--target", "replica-a",
                          "--param", "rnak=1", "--env", str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.splitlines() == [f"chaos: error: {BAD[0][1]}"], run.stderr


def test_a_signal_by_name_or_number_reaches_the_plan(tmp_path, capsys):
    path = env_copy("local-docker", tmp_path / "state")
    for sig in ("KILL", "SIGKILL", "kill", "9"):
        assert chaos_main(["fault", "inject", "kill", "--target", "replica-a", "--param", f"signal={sig}",
                           "--env", str(path), "--dry-run"]) == 0
        assert json.loads(capsys.readouterr().out)["params"]["signal"] == "SIGKILL"
    assert check("kill", {"signal": "TERM"}) == {"sig": signal.SIGTERM}


@pytest.mark.parametrize("kind,params,line", [
    ("http-error", {"status": 200}, "parameter status: expected an integer in [400, 599], got 200"),
    ("http-error", {"status": True}, "parameter status: expected an integer in [400, 599], got True"),
    ("http-error", {"fraction": 1.5}, "parameter fraction: expected a number in [0, 1], got 1.5"),
    ("latency", {"latency": 500.5}, "parameter latency: expected an integer >= 0, got 500.5"),
    ("latency", {"stream": "sideways"}, "parameter stream: expected one of downstream, upstream, both, got 'sideways'"),
    ("stream-cut", {"done": "yes"}, "parameter done: expected true or false, got 'yes'"),
    ("slow-headers", {}, "parameter seconds is required (a number >= 0)"),
    ("header-fault", {"drop": "x-a"}, "parameter drop: expected a list of strings, got 'x-a'"),
    ("http-error", {"match": {"paht": "/v1/*"}}, "parameter match: expected a mapping with path, model or header"),
    ("restart", {"signal": "KILL"}, "unknown parameter 'signal'; it takes recover_timeout_s, seed"),
    ("hang", {"seconds": 1}, "unknown parameter 'seconds'; it takes fraction, spread, match, expect_hits, limit, seed"),
])
def test_each_type_names_the_parameter_and_what_it_takes(kind, params, line):
    with pytest.raises(ConfigError) as e:
        check(kind, params)
    assert str(e.value).startswith(f"fault {kind}: {line}"), str(e.value)


def test_an_unknown_kind_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown fault 'nope'; known: latency, jitter, "):
        check("nope", {})


def test_values_are_normalised():
    assert check("latency", {"latency": 500.0, "toxicity": 1}) == {"latency": 500, "toxicity": 1.0}
    assert check("http-error", {"retry_after": 2}) == {"retry_after": "2"}


class _Target:
    name = "t"


def _build(kind: str, kwargs: dict[str, Any]) -> Any:
    fn = kind.replace("-", "_")
    if kind in HTTP:
        return getattr(http, fn)(FaultProxyAdmin("http://127.0.0.1:1", "tok", name="p"), **kwargs)
    if kind in NETWORK:
        return getattr(faults, fn)("http://127.0.0.1:1", "client", **kwargs)
    return getattr(faults, fn)(_Target(), **kwargs)


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_every_declared_parameter_is_one_its_fault_takes(kind):
    """The table and the fault constructors cannot drift apart: each declared name, with a valid value,
    builds the fault and shows in what it will do (the proxy rule, the toxic's attributes, its params)."""
    samples = {p.name: p.type.sample for p in SPECS[kind]}
    fault = _build(kind, check(kind, samples))
    shown = json.dumps(fault.plan(), default=str)
    common = {"seed", "expect_hits", "name", "probe_via", "probe_enabled", "recover_timeout_s", "stream",
              "toxicity", "spread", "match", "fraction"}
    field = {"slow-headers": {"seconds": "headers_s"}, "slow-first-token": {"seconds": "first_token_s"}}.get(kind, {})
    for name in set(samples) - common:
        assert f'"{field.get(name, name)}"' in shown, (kind, name, shown)


def test_the_table_covers_every_kind_the_cli_names():
    assert set(SPECS) == set(NETWORK + TARGET + HTTP)


PLAN = """\
name: unit plan
experiments:
  - name: one
    hold_s: 5
    fault:
      kind: rank-freeze
      target: replica-a
      rnak: 1
"""


# the field path's list syntax is the schema-error helper's (experiments.0 or experiments[one]); the line,
# the fault's place and the parameter's own line are this module's
PLACE = r"^plan\.yaml:6: experiments(\.0|\[one\])\.fault: "


@pytest.mark.parametrize("text,expected", [
    (PLAN, "fault rank-freeze: unknown parameter 'rnak' (did you mean rank?); "
           "it takes rank, tp_rank, pp_rank, dp_rank, pid, seed"),
    (PLAN.replace("rank-freeze", "http-error").replace("rnak: 1", "status: abc"),
     "fault http-error: parameter status: expected an integer in [400, 599], got 'abc'"),
    (PLAN.replace("rank-freeze", "kill").replace("rnak: 1", "signal: KIL"),
     "fault kill: parameter signal: expected a signal name"),
    (PLAN.replace("rank-freeze", "restart-all"), "unknown fault 'restart-all'; known: latency, "),
])
def test_a_plan_fault_with_a_bad_parameter_is_one_line_at_its_line(text, expected):
    with pytest.raises(ConfigError) as e:
        parse_plan(text, "plan.yaml")
    msg = str(e.value)
    assert re.match(PLACE + re.escape(expected), msg) and "\n" not in msg, msg


SCHEDULE = """\
horizon_s: 60
faults:
  - {kind: jitter, proxy: client, start_s: 1, duration_s: 5, latency: 300}
  - {kind: http-error, target: replica-c, start_s: 2, duration_s: 5, statu: 500}
"""


@pytest.mark.parametrize("text,line,item,expected", [
    (SCHEDULE, 4, 1, "fault http-error: unknown parameter 'statu' (did you mean status?)"),
    (SCHEDULE.replace("latency: 300", "latency: fast").replace("statu:", "status:"), 3, 0,
     "fault jitter: parameter latency: expected an integer >= 0, got 'fast'"),
])
def test_a_schedule_fault_with_a_bad_parameter_is_one_line_at_its_line(text, line, item, expected, tmp_path):
    path = tmp_path / "schedule.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_schedule(path)
    msg = str(e.value)
    place = rf"^{re.escape(str(path))}:{line}: faults(\.{item}|\[{item}\]): "
    assert re.match(place + re.escape(expected), msg) and "\n" not in msg, msg
