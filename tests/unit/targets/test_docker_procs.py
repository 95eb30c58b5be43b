"""`docker top -o pid,stat,lstart,args` read back (chaos.targets.docker_procs), on output recorded from this
machine's engine: the engine merges every field past the last title into the last column."""
from __future__ import annotations

import calendar

import pytest

from chaos.errors import TargetError
from chaos.targets import docker_procs, titles

# docker 27, `container.top(ps_args="-o pid,stat,lstart,args")` of a container running `sh -c 'sleep 300 & exec
# sleep 301'`, and of a TP 2 vLLM layout (titles as measured, docs/vllm-fidelity.md)
RECORDED = {"Titles": ["PID", "STAT", "STARTED", "COMMAND"], "Processes": [
    ["26726", "Ss", "Fri", "Dec 4 13:49:34 2026 /sbin/docker-init -- sh -c sleep 300 & exec sleep 301"],
    ["26753", "S", "Fri", "Dec 4 13:49:34 2026 sleep 301"],
    ["26754", "Tl", "Fri", "Dec 4 13:49:35 2026 VLLM::Worker_TP1"]]}


def test_rows_give_pid_state_start_and_the_whole_command():
    procs = docker_procs.parse_top(RECORDED, "c")
    assert [p.pid for p in procs] == [26726, 26753, 26754]
    assert procs[0].cmd == "/sbin/docker-init -- sh -c sleep 300 & exec sleep 301"
    assert procs[2].state == "T" and procs[2].start == calendar.timegm((2026, 12, 4, 13, 49, 35, 0, 0, 0))
    assert titles.parse(procs[2].cmd) == titles.Title("worker", tp=1)


def test_other_columns_or_a_start_in_another_format_are_one_error_line():
    with pytest.raises(TargetError, match="docker top c: columns .* expected PID STAT STARTED COMMAND"):
        docker_procs.parse_top({"Titles": ["UID", "PID", "CMD"], "Processes": []}, "c")
    bad = {**RECORDED, "Processes": [["1", "S", "vendredi", "4 déc. 13:49:34 2026 x"]]}
    with pytest.raises(TargetError, match="start time .* of pid 1 is not"):
        docker_procs.parse_top(bad, "c")


def test_the_undo_step_carries_what_a_replay_needs():
    step = docker_procs.undo_step("ssh://gpu@host", "chaos-a", 26754, 1796392175, 18, remote=True, target="a")
    assert step == {"kind": "docker_signal", "docker_host": "ssh://gpu@host", "container": "chaos-a", "pid": 26754,
                    "start": 1796392175, "signal": "SIGCONT", "remote": True, "target": "a"}


class _Exiting:
    """A container whose `docker top` fails as its runtime goes away (a fresh-clone run: 500 `ttrpc: closed`)."""

    def __init__(self, status_after: str) -> None:
        self.name, self.status, self._after = "c1", "running", status_after

    def top(self, ps_args: str) -> dict:
        import requests

        import docker

        resp = requests.Response()
        resp.status_code = 500
        raise docker.errors.APIError("500 Server Error", response=resp, explanation="ttrpc: closed: unknown")

    def reload(self) -> None:
        self.status = self._after


def test_a_container_that_stopped_while_asked_has_no_processes_and_a_running_one_s_error_stays_one():
    import pytest

    from chaos.errors import TargetError
    from chaos.targets.docker_procs import top

    assert top(_Exiting("exited"), target="t") == [] and top(_Exiting("restarting"), target="t") == []
    with pytest.raises(TargetError, match="ttrpc: closed"):
        top(_Exiting("running"), target="t")
