"""A container's processes, found and signalled from its Docker host: nothing needed inside the container.

Chosen: discovery with the engine's `docker top` (the engine runs `ps` on ITS host, so it works the same
for a local engine, one over ssh:// and one over tcp://, and whatever the image lacks), asking for
`pid,stat,lstart,args`: host pid, state, start time (the identity an undo step replays against) and the
full command line or process title, at unlimited width (`-ww`): the engine's `ps` otherwise cuts every
line at the width in the ENGINE's environment (COLUMNS=80 when dockerd was started from a shell or a
runner that has it; pytest-xdist workers inherit it from the controller's readline), which left
`python3 -m chaos.stack.sim.ra`: no rank found, and the rank taken for the engine. Signals go to those
host pids from the host's side: on a local engine with os.kill from here (same kernel); on a remote
engine, or when this user may not signal the container's processes (a docker-group user, a rootless
harness), from a throw-away container in the host's PID namespace running the target's own image
(already on that engine) with `sh -c 'kill -SIG PID'`, the shell's builtin: no `kill` binary needed.

Not chosen: `ps`/`kill` through `docker exec` (the official vLLM image has no procps: the exec's error
text was parsed as a process list); `/proc` read through the container's `sh` (POSIX sh's `read`
cannot read the NUL-separated cmdline, dash keeps argv[0] only and loses the simulator's rank, and
its pids are the container's, which only exec could signal); the host over the SSH session (ssh://
engines only, and a docker-group ssh user may not signal root's processes); `docker kill --signal`
(the container's main process only).
"""
from __future__ import annotations

import calendar
import os
import signal as _signal
import time
from typing import Any, NamedTuple

from chaos.errors import TargetError

PS_ARGS = "-ww -o pid,stat,lstart,args"  # -ww: whole command lines, whatever COLUMNS the engine has
_LSTART = "%a %b %d %H:%M:%S %Y"


class HostProc(NamedTuple):
    """One process of a container as its host's `ps` sees it (start: seconds, the identity's half)."""

    pid: int
    state: str
    start: int
    cmd: str


def top(container: Any, *, target: str | None = None) -> list[HostProc]:
    """The container's processes (none when it is not running: restarting or exited)."""
    import docker

    try:
        out = container.top(ps_args=PS_ARGS)
    except docker.errors.APIError as e:
        if e.status_code in (404, 409) or "is not running" in str(e) or _stopped_meanwhile(container):
            return []
        raise TargetError(f"docker top {container.name} ({PS_ARGS}): {e.explanation or e}", target=target) from None
    return parse_top(out, container.name, target=target)


def _stopped_meanwhile(container: Any) -> bool:
    """Whether the container stopped running while `docker top` asked it: a container whose last process
    just died answers with whatever its runtime says as it goes (such as a 500 `ttrpc: closed: unknown`
    as an engine death's container exits), not with "is not running". Its state,
    asked again, says it; a running container's error stays an error."""
    import docker

    try:
        container.reload()
    except docker.errors.NotFound:
        return True
    except docker.errors.APIError:
        return False
    return str(getattr(container, "status", "running")) != "running"


def parse_top(out: dict[str, Any], name: str, *, target: str | None = None) -> list[HostProc]:
    """Rows of `docker top -ww -o pid,stat,lstart,args`: the engine merges every field past the last title
    into the last column, so lstart's five words and the command are split again here."""
    titles = out.get("Titles") or []
    if titles[:2] != ["PID", "STAT"] or len(titles) != 4:
        raise TargetError(f"docker top {name}: columns {titles}, expected PID STAT STARTED COMMAND", target=target)
    procs = []
    for row in out.get("Processes") or []:
        words = " ".join(row[2:]).split(None, 5)
        try:
            start = calendar.timegm(time.strptime(" ".join(words[:5]), _LSTART))
        except ValueError:
            raise TargetError(f"docker top {name}: start time {' '.join(words[:5])!r} of pid {row[0]} is not "
                              f"'{_LSTART}'", target=target) from None
        procs.append(HostProc(int(row[0]), row[1][:1], start, words[5] if len(words) > 5 else ""))
    return procs


def find(container: Any, pid: int, *, target: str | None = None) -> HostProc | None:
    return next((p for p in top(container, target=target) if p.pid == pid), None)


def _same_here(proc: HostProc) -> bool:
    """True when this process sees `proc` under the same pid (the harness shares the engine's PID
    namespace): not so for a harness in a container of its own talking to the host's engine."""
    from chaos.shared import proc as _proc

    return _proc.cmdline(proc.pid).split() == proc.cmd.split() and _proc.alive(proc.pid)


def send(client: Any, container: Any, proc: HostProc, sig: int, *, remote: bool, labels: dict[str, str],
         target: str | None = None) -> str:
    """Signal host process `proc` of `container`; says how. ProcessLookupError when it is gone meanwhile."""
    name, pid = _signal.Signals(sig).name, proc.pid
    if not remote and _same_here(proc):
        try:
            os.kill(pid, sig)
            return f"sent {name} to host pid {pid}"
        except PermissionError:
            pass  # not ours to signal from here: from the host's PID namespace as root, below
    import docker

    cmd = f"kill -{name[3:]} {pid}"
    try:
        client.containers.run(container.image.id, ["sh", "-c", cmd], entrypoint=[], user="0", pid_mode="host",
                              network_mode="none", remove=True, labels=labels)
    except docker.errors.ContainerError as e:
        err = (e.stderr or b"").decode(errors="replace").strip()
        if "No such process" in err:
            raise ProcessLookupError(f"pid {pid} of {container.name}: {err}") from None
        raise TargetError(f"`{cmd}` in a helper container (image of {container.name}, host PID namespace) "
                          f"exited {e.exit_status}: {err}", target=target) from None
    except docker.errors.APIError as e:
        raise TargetError(f"`{cmd}` in a helper container (image of {container.name}): {e.explanation or e}",
                          target=target) from None
    return f"sent {name} to host pid {pid} (helper container in the host's PID namespace)"


def undo_step(docker_host: str | None, container: str, pid: int, start: int | None, sig: int, *,
              remote: bool, target: str | None = None) -> dict[str, Any]:
    """The ledger's record of a signal to host pid `pid` of a container, with its start for identity."""
    return {"kind": "docker_signal", "docker_host": docker_host, "container": container, "pid": pid,
            "start": start, "signal": _signal.Signals(sig).name, "remote": remote, "target": target}


def replay(step: dict[str, Any]) -> str:
    """Perform a docker_signal step: only to the same process (pid and start) still in that container."""
    import docker as sdk
    from chaos.targets.docker_client import LABEL_RUN, client_for

    pid, sig, where = int(step["pid"]), _signal.Signals[step["signal"]], step["container"]
    client = client_for(step.get("docker_host"))
    try:
        try:
            c = client.containers.get(where)
        except sdk.errors.NotFound:
            return f"container {where} gone; no {sig.name} needed"
        p = find(c, pid, target=step.get("target"))
        if p is None or p.state in ("Z", "X") or (step.get("start") is not None and p.start != int(step["start"])):
            return f"pid {pid} of {where} gone; no {sig.name} needed"
        labels = {LABEL_RUN: (c.labels or {}).get(LABEL_RUN, "cleanup"), "llm-chaos.helper": f"{sig.name} {where}"}
        try:
            return send(client, c, p, sig, remote=bool(step.get("remote")), labels=labels,
                        target=step.get("target")) + f" of {where}"
        except ProcessLookupError:
            return f"pid {pid} of {where} gone; no {sig.name} needed"
    finally:
        client.close()
