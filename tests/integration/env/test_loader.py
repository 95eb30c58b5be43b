"""The environment loader: good files load, every kind of bad file is one clear line."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chaos.env import available, load, parse
from chaos.errors import ConfigError

REPO = Path(__file__).resolve().parents[3]
ENV_DIR = REPO / "environments"

MINIMAL = "name: t\nendpoints: {api: 'http://127.0.0.1:1'}\n"


def one_line(e: pytest.ExceptionInfo[ConfigError]) -> str:
    msg = str(e.value)
    assert "\n" not in msg and "Traceback" not in msg
    return msg


@pytest.mark.parametrize("name", ["local", "ci", "local-docker"])
def test_shipped_environments_load(name: str) -> None:
    env = load(name, ENV_DIR)
    assert env.name == name
    assert env.retry.min_interval_s >= 0.5
    assert env.breaker.degrade_error_rate == 0.01 and env.breaker.rollback_error_rate == 0.03


def test_staging_example_needs_its_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STAGING_API_KEY", raising=False)
    with pytest.raises(ConfigError) as e:
        load("staging.example", ENV_DIR)
    assert "${STAGING_API_KEY}" in one_line(e)
    monkeypatch.setenv("STAGING_API_KEY", "k")
    monkeypatch.setenv("HF_TOKEN", "h")
    env = load("staging.example", ENV_DIR)
    assert env.safety.protected and env.targets[0].gpus == [0, 1] and env.targets[0].ipc_host
    assert env.endpoints.api_key == "k"


def test_a_variable_the_harness_never_reads_is_not_needed_to_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """staging.example's ${HF_TOKEN} sits in a target's env, which the harness passes only to a replica it
    starts; with embedded: none it starts none, so the file loads without it and says so."""
    monkeypatch.delenv("HF_TOKEN", raising=False)
    env = load("staging.example", ENV_DIR, environ={"STAGING_API_KEY": "k"})
    assert env.targets[0].env == {} and len(env.unset_unused) == 2
    assert env.unset_unused[0].startswith("targets[gpu-1].env.HF_TOKEN: environment variable ${HF_TOKEN} is not "
                                          "set, and it is not needed: embedded: none"), env.unset_unused
    assert load("staging.example", ENV_DIR, environ={"STAGING_API_KEY": "k", "HF_TOKEN": "h"}).targets[0].env == \
        {"HF_TOKEN": "h"}
    # a replica the harness starts gets its env: there the variable is needed, and its absence is the error
    text = ("name: t\nendpoints: {api: 'http://127.0.0.1:1'}\nembedded: docker\ntargets:\n"
            "  - {name: a, kind: docker, image: i, port: 9, env: {HF_TOKEN: '${HF_TOKEN}'}}\n")
    with pytest.raises(ConfigError) as e:
        parse(text, "e.yaml", {})
    assert one_line(e) == "e.yaml:5: targets[a].env.HF_TOKEN: environment variable ${HF_TOKEN} is not set"
    # the API key is read by every request, embedded or not
    with pytest.raises(ConfigError) as e:
        load("staging.example", ENV_DIR, environ={"HF_TOKEN": "h"})
    assert "${STAGING_API_KEY}" in one_line(e)


def test_unknown_name_lists_available() -> None:
    with pytest.raises(ConfigError) as e:
        load("nope", ENV_DIR)
    msg = one_line(e)
    assert "nope" in msg and "local" in msg and "ci" in msg
    assert "local" in available(ENV_DIR)


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load(str(tmp_path / "x.yaml"))
    bad = tmp_path / "bin.yaml"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError) as e:
        load(str(bad))
    assert str(bad) in one_line(e) and "cannot read" in str(e.value)


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "broken.yaml"
    f.write_text("name: t\nendpoints:\n  api: [unclosed\n  model: x\n")
    with pytest.raises(ConfigError) as e:
        load(str(f))
    msg = one_line(e)
    assert f"{f}:" in msg and "YAML syntax error" in msg
    line = int(msg.split(f"{f}:")[1].split(":")[0])
    assert 3 <= line <= 5


@pytest.mark.parametrize(
    "text, expect",
    [
        ("name: t\n", "endpoints: required field is missing"),
        (MINIMAL + "retry: {min_interval_s: 0.1}\n", "retry.min_interval_s"),
        (MINIMAL + "retry: {min_interval_s: 'soon'}\n", "retry.min_interval_s"),
        (MINIMAL + "breaker: {rollback_error_rate: 0.005}\n", "rollback_error_rate must be >="),
        (MINIMAL + "targets: [{name: a, kind: vm, port: 1, command: [x]}]\n", "env.yaml:3: targets[a].kind: Input should be"),
        (MINIMAL + "targets: [{name: a, kind: docker, port: 1}]\n", "needs 'image'"),
        (MINIMAL + "targets: [{name: a, kind: process, port: 1, command: [x], cpus: 1.5}]\n",
         "targets[a]: 'cpus' limits a container: it applies to docker targets only"),
        (MINIMAL + "targets: [{name: a, kind: docker, image: i, port: 1, cpus: 0}]\n",
         "targets[a].cpus: Input should be greater than 0"),
        (MINIMAL + "targets: [{name: a, kind: process, port: 99999, command: [x]}]\n", ":3: targets[a].port"),
        (MINIMAL + "bogus: 1\n", "bogus: unknown field"),
        ("- a\n- b\n", "expected a mapping"),
        ("", "file is empty"),
    ],
)
def test_schema_errors_name_the_field(text: str, expect: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse(text, "env.yaml", environ={})
    msg = one_line(e)
    assert msg.startswith("env.yaml") and expect in msg


def test_schema_error_says_what_was_found() -> None:
    with pytest.raises(ConfigError) as e:
        parse(MINIMAL + "retry: {max_attempts: -3}\n", "e.yaml", environ={})
    assert "retry.max_attempts" in str(e.value) and "-3" in str(e.value)


def test_var_expansion_and_default() -> None:
    text = "name: t\nendpoints: {api: 'http://${HOST}:${PORT:-8000}', api_key: '${KEY}'}\n"
    env = parse(text, "e.yaml", environ={"HOST": "127.0.0.1", "KEY": "s3cret"})
    assert env.endpoints.api == "http://127.0.0.1:8000" and env.endpoints.api_key == "s3cret"
    with pytest.raises(ConfigError) as e:
        parse(text, "e.yaml", environ={"HOST": "h"})
    assert "endpoints.api_key" in one_line(e) and "${KEY}" in str(e.value)


def test_undefined_proxy_reference_is_an_error() -> None:
    text = MINIMAL + "targets: [{name: a, kind: process, port: 1, command: [x], serve_proxy: nope}]\n"
    with pytest.raises(ConfigError, match="proxy 'nope'"):
        parse(text, "e.yaml", environ={})


def test_fault_proxy_references_and_addresses_are_checked() -> None:
    text = MINIMAL + "targets: [{name: a, kind: process, port: 1, command: [x], fault_proxy: nope}]\n"
    with pytest.raises(ConfigError, match="fault proxy 'nope'"):
        parse(text, "e.yaml", environ={})
    bad = MINIMAL + "fault_proxies: [{name: p, listen: '127.0.0.1', upstream: 'http://127.0.0.1:1'}]\n"
    with pytest.raises(ConfigError, match="HOST:PORT") as e:
        parse(bad, "e.yaml", environ={})
    assert "\n" not in str(e.value)
    ok = parse(MINIMAL + "fault_proxies: [{name: p, listen: '127.0.0.1:9', upstream: 'http://127.0.0.1:1'}]\n"
               "targets: [{name: a, kind: process, port: 1, command: [x], fault_proxy: p}]\n", "e.yaml", environ={})
    assert ok.fault_proxy_of("a").admin_url == "http://127.0.0.1:9" and ok.fault_proxies[0].token_env == "CHAOS_PROXY_TOKEN"


def test_unknown_target_lookup() -> None:
    env = load("local", ENV_DIR)
    assert env.target("replica-a").tp_size == 2
    with pytest.raises(ConfigError, match="no target 'x'.*replica-a"):
        env.target("x")


yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
field_names = st.sampled_from(["name", "endpoints", "targets", "retry", "breaker", "slas", "load", "safety",
                               "toxiproxy", "time_scale", "api", "kind", "port", "${X}"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.dictionaries(field_names, yaml_values, max_size=6), yaml_values, st.text(max_size=200)))
def test_fuzz_random_yaml_never_tracebacks(doc: object) -> None:
    text = doc if isinstance(doc, str) else yaml.safe_dump(doc, allow_unicode=True)
    try:
        parse(text, "fuzz.yaml", environ={})
    except ConfigError as e:
        assert all(line.startswith("fuzz.yaml") for line in str(e).splitlines()), str(e)


def test_port_offset_moves_every_loopback_port_and_the_state_dir() -> None:
    from chaos.env import load

    base, moved = load("local-vllm", environ={}), load("local-vllm", environ={"CHAOS_PORT_OFFSET": "1000"})
    assert moved.state_dir == f"{base.state_dir}-port+1000"
    assert moved.endpoints.api == "http://127.0.0.1:20000" and moved.gateway.listen == "127.0.0.1:20100"
    assert moved.toxiproxy.api == "http://127.0.0.1:20474"
    assert [p.upstream for p in moved.toxiproxy.proxies] == [f"127.0.0.1:{int(p.upstream.rsplit(':', 1)[1]) + 1000}"
                                                            for p in base.toxiproxy.proxies]
    assert [t.port for t in moved.targets] == [t.port + 1000 for t in base.targets]
    assert [p.upstream for p in moved.fault_proxies] == ["http://127.0.0.1:20201", "http://127.0.0.1:20202",
                                                        "http://127.0.0.1:20203"]


def test_port_offset_leaves_remote_hosts_alone(tmp_path: Path) -> None:
    from chaos.env import parse

    text = ("name: r\nendpoints: {api: 'http://10.0.0.5:8000'}\n"
            "targets: [{name: a, kind: docker, image: x, host: 10.0.0.5, port: 8000}]\n")
    env = parse(text, tmp_path / "r.yaml", environ={"CHAOS_PORT_OFFSET": "7"})
    assert env.endpoints.api == "http://10.0.0.5:8000" and env.targets[0].port == 8000


@pytest.mark.parametrize("bad", ["abc", "1.5", "99999"])
def test_bad_port_offset_is_one_line_naming_the_variable(bad: str) -> None:
    from chaos.env import load
    from chaos.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        load("local", environ={"CHAOS_PORT_OFFSET": bad})
    assert "CHAOS_PORT_OFFSET" in str(e.value) and "\n" not in str(e.value)


def test_a_vllm_target_becomes_a_vllm_serve_command() -> None:
    from chaos.env import load
    from chaos.targets import make_target

    env = load("local-vllm", environ={})
    a, b = (make_target(env.target(n), run_id="t", state_dir="/tmp/x", env=env) for n in ("replica-a", "replica-b"))
    assert a.command[0].endswith("vllm-serve") and b.command[0].endswith("vllm-serve")
    assert (a.nice, b.nice) == (0, 0) and b.env["VLLM_CPU_OMP_THREADS_BIND"] == "nobind"
    args = a.command[1:]
    # replica-a is compiled (its 4 s timeout needs the first step warm), replica-b eager
    # the checkout's model (made absolute once `make setup-vllm` has put it there, for runs from elsewhere)
    repo = Path(__file__).resolve().parents[3]
    assert Path(args[0]).absolute() == repo / ".tools/vllm/models/tiny-llama" and "--enforce-eager" not in args
    assert "--enforce-eager" in b.command[1:]
    assert args[args.index("--tensor-parallel-size") + 1] == "2" and args[args.index("--port") + 1] == "19201"
    assert args[args.index("--served-model-name") + 1] == "sim-model"
    assert a.env["VLLM_CPU_OMP_THREADS_BIND"] == "0|1" and a.env["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"] == "4"
    assert b.env["OMP_NUM_THREADS"] == "1"  # the file's own env is passed on
    assert env.target("replica-a").backend == "vllm" and load("local", environ={}).targets[0].backend == "simulator"


# ---- where the state lives: one directory, whatever the working directory ------------------------
def _in(tmp_path: Path, sub: str, name: str, state: str | None) -> Path:
    d = tmp_path / sub
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{name}.yaml").write_text(MINIMAL + (f"state_dir: {state}\n" if state is not None else ""))
    return d / f"{name}.yaml"


@pytest.mark.parametrize("state, expect", [("../run-state", "project/run-state"), (".state", "project/envs/.state"),
                                           (None, "project/envs/.state")])
def test_a_relative_state_dir_is_taken_from_the_file_s_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              state: str | None, expect: str) -> None:
    f = _in(tmp_path, "project/envs", "mine", state)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    seen = set()
    for cwd, ref in ((tmp_path / "project", "envs/mine.yaml"), (elsewhere, str(f)), (elsewhere, "mine")):
        monkeypatch.chdir(cwd)
        seen.add(load(ref, tmp_path / "project" / "envs" if ref == "mine" else None, environ={}).state_dir)
    assert seen == {str(tmp_path / expect)}  # by relative path, by absolute path, by name: one state


def test_an_absolute_state_dir_is_kept_and_the_port_offset_still_moves_it(tmp_path: Path) -> None:
    f = _in(tmp_path, "envs", "abs", str(tmp_path / "s"))
    assert load(str(f), environ={}).state_dir == str(tmp_path / "s")
    assert load(str(f), environ={"CHAOS_PORT_OFFSET": "5"}).state_dir == str(tmp_path / "s-port+5")
    rel = tmp_path / "envs" / "rel.yaml"  # a port a negative offset can move and stay a port
    rel.write_text(MINIMAL.replace(":1'", ":18000'") + "state_dir: st\n")
    assert load(str(rel), environ={"CHAOS_PORT_OFFSET": "-5"}).state_dir == str(tmp_path / "envs" / "st-port-5")


def test_the_shipped_environments_keep_their_state_in_the_repository_root() -> None:
    for name in available(ENV_DIR):
        env = load(name, ENV_DIR, environ={"STAGING_API_KEY": "k", "HF_TOKEN": "t", "CHAOS_PROXY_TOKEN": "t"})
        assert Path(env.state_dir).parent == REPO / ".state", (name, env.state_dir)


def test_an_environment_built_in_code_keeps_its_state_dir_as_written() -> None:
    from chaos.env.model import Environment

    env = Environment.model_validate(yaml.safe_load(MINIMAL))
    assert env.state_dir == ".state"  # relative to the working directory: there is no file to anchor it
