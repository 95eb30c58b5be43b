"""Broken environment files are refused when read: one line per problem, naming file:line, the
field and the target (or proxy) by name, every problem listed."""
from __future__ import annotations

from pathlib import Path

import pytest

from chaos.env import parse
from chaos.errors import ConfigError
from tests.integration.cli.test_cli import chaos

HEAD = "name: t\nendpoints: {api: 'http://127.0.0.1:1'}\n"
TARGET = """targets:
  - name: gpu-1
    kind: docker
    image: vllm/vllm-openai
    port: 8000
    {field}: {value}
"""


def refused(text: str, path: str = "env.yaml") -> list[str]:
    with pytest.raises(ConfigError) as e:
        parse(text, path, environ={})
    lines = str(e.value).splitlines()
    assert lines and all(line.startswith(f"{path}:") for line in lines), lines
    return lines


@pytest.mark.parametrize("value, why", [
    ("ssh://", "no host"),
    ("ssh://deploy@", "no host after 'deploy@'"),
    ("gpu-1.staging.example.internal", "no scheme"),
    ("ssh://deploy@gpu-1:84430", "port 84430 is outside 1-65535"),
    ("ssh://@gpu-1", "the user before '@' is empty"),
    ("tcp://gpu-1", "no port"),
    ("unix://", "absolute socket path"),
    ("http://gpu-1:2375", "unknown scheme"),
])
def test_a_bad_docker_host_is_one_line_naming_line_target_and_field(value: str, why: str) -> None:
    [line] = refused(HEAD + TARGET.format(field="docker_host", value=f"'{value}'"))
    assert line.startswith("env.yaml:8: targets[gpu-1].docker_host: expected ssh://[user@]host[:port]"), line
    assert f"found {value!r}" in line and why in line


@pytest.mark.parametrize("value", ["ssh://gpu-1", "ssh://deploy@gpu-1", "ssh://deploy@gpu-1:2222",
                                   "ssh://root@10.231.1.2/run/chaos-lab/gpu/docker.sock", "ssh://deploy@[fd00::5]:22",
                                   "unix:///var/run/docker.sock", "tcp://10.0.0.5:2376"])
def test_docker_hosts_docker_reads_are_accepted(value: str) -> None:
    env = parse(HEAD + TARGET.format(field="docker_host", value=f"'{value}'"), "env.yaml", environ={})
    assert env.targets[0].docker_host == value


@pytest.mark.parametrize("policy", ["always", "unless-stopped", "on-failure", "no"])
def test_every_docker_restart_policy_is_accepted(policy: str) -> None:
    env = parse(HEAD + TARGET.format(field="restart_policy", value=policy), "env.yaml", environ={})
    assert env.targets[0].restart_policy == policy


def test_a_bad_restart_policy_names_the_target_and_the_policies() -> None:
    [line] = refused(HEAD + TARGET.format(field="restart_policy", value="sometimes"))
    assert line.startswith("env.yaml:8: targets[gpu-1].restart_policy: ") and "'unless-stopped'" in line, line
    assert "found 'sometimes'" in line


@pytest.mark.parametrize("text, where, found", [
    ("toxiproxy: {proxies: [{name: edge, listen: '127.0.0.1:84430', upstream: '10.0.0.5:8000'}]}\n",
     "env.yaml:3: toxiproxy.proxies[edge].listen", "port 84430 is outside 1-65535"),
    ("toxiproxy: {proxies: [{name: edge, listen: '127.0.0.1:8000', upstream: 'gw'}]}\n",
     "env.yaml:3: toxiproxy.proxies[edge].upstream", "no port"),
    ("toxiproxy: {api: 'http://127.0.0.1:99999'}\n", "env.yaml:3: toxiproxy.api", "port 99999"),
    ("fault_proxies: [{name: fp-1, listen: ':0', upstream: 'http://127.0.0.1:1'}]\n",
     "env.yaml:3: fault_proxies[fp-1].listen", "no host"),
    ("fault_proxies: [{name: fp-1, listen: '127.0.0.1:9', upstream: '127.0.0.1:1'}]\n",
     "env.yaml:3: fault_proxies[fp-1].upstream", "no http:// or https:// scheme"),
    ("gateway: {listen: '127.0.0.1:70000'}\n", "env.yaml:3: gateway.listen", "port 70000"),
    ("load: {worker_host: 'ssh://deploy@'}\n", "env.yaml:3: load.worker_host", "no host after 'deploy@'"),
    ("load: {worker_host: 'ssh://h:0'}\n", "env.yaml:3: load.worker_host", "port 0 is outside"),
    ("telemetry: {dcgm_url: 'http://gpu-1:123456'}\n", "env.yaml:3: telemetry.dcgm_url", "port 123456"),
    ("targets: [{name: a, kind: process, port: 1, command: [x], tp_size: 2, rank_ports: [70000]}]\n",
     "env.yaml:3: targets[a].rank_ports[0]", "less than or equal to 65535"),
])
def test_every_host_port_has_a_port_in_range(text: str, where: str, found: str) -> None:
    [line] = refused(HEAD + text)
    assert line.startswith(where + ": ") and found in line, line


def test_an_api_url_port_out_of_range_is_refused() -> None:
    [line] = refused("name: t\nendpoints:\n  api: 'http://127.0.0.1:84430'\n")
    assert line.startswith("env.yaml:3: endpoints.api: expected an http:// URL") and "84430" in line, line


BROKEN = """name: broken
endpoints: {api: "http://127.0.0.1:18000"}
targets:
  - name: gpu-1
    kind: docker
    image: vllm/vllm-openai
    port: 8000
    docker_host: "ssh://"
    restart_policy: sometimes
  - name: gpu-2
    kind: docker
    image: vllm/vllm-openai
    port: 8000
    docker_host: "ssh://deploy@"
fault_proxies:
  - {name: fp-1, listen: "127.0.0.1:84430", upstream: "http://127.0.0.1:8000"}
"""


def test_every_error_is_listed_in_file_order() -> None:
    lines = refused(BROKEN, "broken.yaml")
    assert [line.split(": ")[0:2] for line in lines] == [
        ["broken.yaml:8", "targets[gpu-1].docker_host"], ["broken.yaml:9", "targets[gpu-1].restart_policy"],
        ["broken.yaml:14", "targets[gpu-2].docker_host"], ["broken.yaml:16", "fault_proxies[fp-1].listen"]], lines
    assert not any("more)" in line for line in lines)


def test_cross_references_are_all_listed_where_they_are() -> None:
    text = HEAD + ("targets:\n"
                   "  - {name: a, kind: process, port: 1, command: [x], serve_proxy: nope, fault_proxy: nah}\n"
                   "  - {name: b, kind: process, port: 2, command: [x], tp_size: 3, rank_ports: [5]}\n")
    lines = refused(text)
    assert lines == [
        "env.yaml:4: targets[a].serve_proxy: names toxiproxy proxy 'nope', which is not defined (toxiproxy.proxies: none)",
        "env.yaml:4: targets[a].fault_proxy: names fault proxy 'nah', which is not defined (fault_proxies: none)",
        "env.yaml:5: targets[b].rank_ports: needs tp_size - 1 = 2 entries, found 1"], lines


def test_a_target_without_a_name_is_named_by_its_index() -> None:
    lines = refused(HEAD + "targets:\n  - {kind: process, port: 1, command: [x]}\n")
    assert lines == ["env.yaml:4: targets[0].name: required field is missing"], lines


def test_the_cli_prints_every_line_and_exits_2(tmp_path: Path) -> None:
    p = tmp_path / "broken.yaml"
    p.write_text(BROKEN)
    r = chaos("env", "check", "--env", str(p))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 4 and all(line.startswith(f"chaos: error: {p}:") for line in lines), lines
    assert f"chaos: error: {p}:14: targets[gpu-2].docker_host: " in r.stderr


def test_an_unset_variable_names_the_target_by_name() -> None:
    text = HEAD + TARGET.format(field="docker_host", value="'ssh://deploy@${GPU_HOST}'")
    [line] = refused(text)
    assert line == "env.yaml:8: targets[gpu-1].docker_host: environment variable ${GPU_HOST} is not set", line
