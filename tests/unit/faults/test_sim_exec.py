"""The simulator's admin call made from inside its container (chaos.faults.sim_exec): which engine deaths
take that path, and its failures as one line naming the container and the command (the script itself:
tests/integration/faults/test_sim_exec_script.py)."""
from __future__ import annotations

import pytest

from chaos.errors import FaultError, TargetError
from chaos.faults import engine_death, sim_exec
from chaos.faults.sim_admin import SimFault
from chaos.faults.tokens import TokenRef
from chaos.targets.docker import DockerTarget
from chaos.targets.process import ProcessTarget


def _docker(host: str) -> DockerTarget:
    return DockerTarget("replica-a", "llm-chaos-sim:latest", host=host, port=8001, container_name="lab-replica-a",
                        docker_host="ssh://root@10.231.1.2/run/chaos-lab/gpu/docker.sock", client=object())


def test_a_simulator_container_on_another_host_is_called_from_inside_it() -> None:
    f = engine_death(_docker("10.231.1.2"), "simulator", sim_url="http://10.231.1.2:8001", token="t")
    assert isinstance(f, SimFault) and f.via is not None and f.via.container_name == "lab-replica-a"
    assert f.params()["via"] == "exec in container lab-replica-a"
    assert "from inside container lab-replica-a (loopback source)" in f.plan()["steps"][0]
    assert f.plan()["undo"] == [{"kind": "container_http", "container": "lab-replica-a",
                                 "docker_host": "ssh://root@10.231.1.2/run/chaos-lab/gpu/docker.sock",
                                 "method": "DELETE", "url": "http://10.231.1.2:8001/admin/faults/engine-death",
                                 "auth": {"literal": "<redacted>"}}]
    here = engine_death(_docker("127.0.0.1"), "simulator", sim_url="http://127.0.0.1:8001", token="t")
    assert isinstance(here, SimFault) and here.via is None and here.plan()["undo"][0]["kind"] == "http"


def test_a_simulator_process_on_another_address_is_refused_in_one_line(tmp_path) -> None:
    t = ProcessTarget("far", ["true"], host="10.0.0.9", port=8001, state_dir=tmp_path)
    with pytest.raises(FaultError, match="far: the simulator's admin API answers only on its own host's loopback "
                                         "and 10.0.0.9 is another host; only a Docker target's container") as e:
        engine_death(t, "simulator", sim_url="http://10.0.0.9:8001", token="t")
    assert "\n" not in str(e.value)


class _Exec:
    def __init__(self, rc: int, out: str) -> None:
        self.rc, self.out = rc, out

    def __call__(self, client: object, container: str, cmd: list[str], **kw: object) -> tuple[int, str]:
        return self.rc, self.out


def test_failures_in_the_container_are_one_line_naming_it_and_the_command(monkeypatch) -> None:
    import chaos.targets.docker_exec as dx

    token = TokenRef(literal="s3cret")
    oci = 'OCI runtime exec failed: exec failed: unable to start container process: exec: "python3": ' \
          'executable file not found in $PATH: unknown\n'
    monkeypatch.setattr(dx, "exec_collect", _Exec(127, oci))
    with pytest.raises(TargetError) as e:
        sim_exec.call(object(), "lab-replica-a", "GET", "http://10.231.1.2:8001/admin/faults", token, target="replica-a")
    assert str(e.value).startswith("target replica-a: `python3 -c <admin call> GET http://10.231.1.2:8001/admin/faults` "
                                   "in container lab-replica-a exited 127: OCI runtime exec failed")
    assert "\n" not in str(e.value) and "s3cret" not in str(e.value)
    monkeypatch.setattr(dx, "exec_collect", _Exec(sim_exec.NOT_ANSWERING, '{"error": "[Errno 111] Connection refused"}'))
    with pytest.raises(sim_exec.NotAnswering, match="not answering"):
        sim_exec.call(object(), "lab-replica-a", "GET", "http://10.231.1.2:8001/admin/faults", token)

    def not_running(*a: object, **kw: object) -> tuple[int, str]:
        import docker

        raise docker.errors.APIError("409", explanation="Container abc is restarting, wait until it is running")

    monkeypatch.setattr(dx, "exec_collect", not_running)
    with pytest.raises(sim_exec.NotAnswering, match="lab-replica-a: cannot exec there .Container abc is restarting"):
        sim_exec.call(object(), "lab-replica-a", "GET", "http://10.231.1.2:8001/admin/faults", token)
