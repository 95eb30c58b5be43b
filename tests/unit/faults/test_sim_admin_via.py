"""The simulator's planted defects (leak, tokenizer crash) on a replica on another host: a container there
gets them, and their undo, from inside itself (chaos.faults.sim_exec), as engine death does; only a
process there has no path, and the plan's gates skip exactly that, naming it (lab runs: docs/lab.md)."""
from __future__ import annotations

from pathlib import Path

import pytest

from chaos.env import Environment, load
from chaos.errors import FaultError
from chaos.experiment.suite_plan import RUN, SKIP, no_simulator_canary, no_simulator_replica, plan
from chaos.faults.sim_admin import SimFault, admin_via
from chaos.faults.tokens import TokenRef
from chaos.fixtures.stack import StackHandle
from chaos.targets.docker import DockerTarget
from chaos.targets.process import ProcessTarget

LAB_SOCK = "ssh://root@10.231.1.2/run/chaos-lab/gpu/docker.sock"


def _lab(*as_process: str) -> Environment:
    """The lab, with the targets named in `as_process` made simulator processes on the GPU host's address."""
    env = load("lab", environ={})
    env.targets = [t.model_copy(update={"kind": "process"}) if t.name in as_process else t for t in env.targets]
    return env


def _row(env: Environment, starts: str) -> tuple[str, str]:
    r = next(r for r in plan(env, allow_destructive=True) if r.what.startswith(starts))
    return r.verdict, r.reason


def test_the_lab_s_simulator_containers_get_the_leak_and_the_tokenizer_crash() -> None:
    lab = _lab()
    assert no_simulator_canary(lab) is None and no_simulator_replica(lab) is None
    assert _row(lab, "leak trend") == (RUN, "") and _row(lab, "tokenizer crash") == (RUN, "")


def test_a_simulator_process_on_another_host_still_skips_and_says_which() -> None:
    why = ("the simulator's admin API, which plants the defect, answers only on its own host's loopback; "
           "{} run(s) on another host as a process, with no container the call could be made from")
    canary_far = _lab("replica-c")  # the canary: the leak trend has no path; replica-a still takes the crash
    assert no_simulator_canary(canary_far) == why.format("replica-c")
    assert _row(canary_far, "leak trend") == (SKIP, why.format("replica-c"))
    assert _row(canary_far, "tokenizer crash")[0] == RUN
    both = _lab("replica-a", "replica-c")
    assert no_simulator_replica(both) == why.format("replica-a, replica-c")
    assert _row(both, "tokenizer crash") == (SKIP, why.format("replica-a, replica-c"))


def _docker(name: str, host: str) -> DockerTarget:
    return DockerTarget(name, "llm-chaos-sim:latest", host=host, port=8001, container_name=f"lab-{name}",
                        docker_host=LAB_SOCK, client=object())


def _stack(env: Environment, targets: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> StackHandle:
    monkeypatch.setattr(StackHandle, "admin_token", lambda self, state_dir=None: TokenRef(literal="t"))
    return StackHandle(env, targets, "run-1", None)  # type: ignore[arg-type]


def test_the_stack_plants_leak_and_tokenizer_crash_from_inside_a_remote_container(monkeypatch) -> None:
    env = _lab()
    st = _stack(env, {t.name: _docker(t.name, t.host) for t in env.targets}, monkeypatch)
    leak, = st.leak_faults(["replica-c"], 3 << 20)
    assert isinstance(leak, SimFault) and leak.via is not None and leak.via.container_name == "lab-replica-c"
    assert leak.mode_params == {"bytes_per_request": 3 << 20}
    assert "from inside container lab-replica-c (loopback source)" in leak.plan()["steps"][0]
    assert leak.plan()["undo"] == [{"kind": "container_http", "container": "lab-replica-c", "docker_host": LAB_SOCK,
                                    "method": "DELETE", "url": "http://10.231.1.2:8003/admin/faults/leak",
                                    "auth": {"literal": "<redacted>"}}]
    crash = st.tokenizer_crash_faults()
    assert sorted(crash) == ["replica-a", "replica-c"]
    for name, f in crash.items():
        assert isinstance(f, SimFault) and f.mode == "tokenizer-crash" and f.destructive
        assert f.via is not None and f.via.container_name == f"lab-{name}"
        assert f.plan()["undo"][0]["kind"] == "container_http"


def test_a_simulator_on_this_machine_s_loopback_is_called_straight(monkeypatch, tmp_path: Path) -> None:
    env = load("local", environ={})
    targets = {t.name: ProcessTarget(t.name, ["true"], host=t.host, port=t.port, state_dir=tmp_path)
               for t in env.targets}
    st = _stack(env, targets, monkeypatch)
    canary = [t.name for t in env.targets if t.pool == "canary"]
    leak = st.leak_faults(canary, 1 << 20)
    assert leak and all(isinstance(f, SimFault) and f.via is None for f in leak)
    assert leak[0].plan()["undo"][0]["kind"] == "http"
    assert all(isinstance(f, SimFault) and f.via is None for f in st.tokenizer_crash_faults().values())


def test_a_process_on_another_host_is_refused_in_one_line_naming_the_mode(tmp_path: Path) -> None:
    far = ProcessTarget("far", ["true"], host="10.0.0.9", port=8001, state_dir=tmp_path)
    with pytest.raises(FaultError, match="far: the simulator's admin API answers only on its own host's loopback "
                                         "and 10.0.0.9 is another host") as e:
        admin_via(far, "http://10.0.0.9:8001", "leak")
    assert e.value.fault == "sim-leak" and "\n" not in str(e.value)
    assert admin_via(_docker("far", "10.0.0.9"), "http://10.0.0.9:8001", "leak") is not None
    assert admin_via(far, "http://127.0.0.1:8001", "leak") is None
