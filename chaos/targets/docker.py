"""DockerTarget: a container on the local engine or a remote DOCKER_HOST, labelled with the run id.

Processes (ranks, the engine) are HOST pids from the engine's `docker top`, signalled from the host's
side, local or remote engine alike: nothing but the server is needed in the container (docker_procs says
why this way).
"""
from __future__ import annotations

import os
import signal as _signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chaos.errors import TargetError
from chaos.targets import docker_procs, titles
from chaos.targets.base import http_health, wait_until
from chaos.targets.docker_client import LABEL_RUN, LABEL_STATE, LABEL_TARGET, client_for


class DockerTarget:
    """One container; created on start() with labels, restart policy, host network, ipc, shm and GPUs."""

    def __init__(self, name: str, image: str, *, args: list[str] | None = None, port: int, host: str = "127.0.0.1",
                 container_name: str | None = None, docker_host: str | None = None, run_id: str = "local",
                 state_dir: str | os.PathLike[str] = ".state", restart_policy: str = "always",
                 gpus: int | str | list[int | str] = 0,
                 ipc_host: bool = False, shm_size: str | None = None, cpus: float | None = None,
                 env: dict[str, str] | None = None, volumes: dict[str, dict[str, str]] | None = None, client: Any = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.name, self.image, self.args, self.port, self.host = name, image, list(args or []), port, host
        self.container_name = container_name or f"chaos-{run_id}-{name}"
        self.docker_host = docker_host
        self.run_id, self.state_dir, self.restart_policy = run_id, Path(state_dir), restart_policy
        self.gpus, self.ipc_host, self.shm_size, self.env, self.volumes = gpus, ipc_host, shm_size, dict(env or {}), volumes
        self.cpus = cpus
        self._client = client
        self._sleep = sleep
        self._container: Any = None
        self._manual_restarts = 0
        self._carried_restarts = 0  # restarts Docker stopped counting (see restart())
        host_env = docker_host or os.environ.get("DOCKER_HOST", "")
        self.remote = bool(host_env) and not host_env.startswith("unix://")

    def __repr__(self) -> str:
        return f"DockerTarget({self.name!r}, container={self.container_name!r})"

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = client_for(self.docker_host)
        return self._client

    @property
    def container(self) -> Any:
        if self._container is None:
            import docker

            try:
                self._container = self.client.containers.get(self.container_name)
            except docker.errors.NotFound:
                raise TargetError(f"container {self.container_name} does not exist (not started?)", target=self.name) from None
        self._container.reload()
        return self._container

    def labels(self) -> dict[str, str]:
        return {LABEL_RUN: self.run_id, LABEL_TARGET: self.name, LABEL_STATE: str(self.state_dir.resolve())}

    def _run_kwargs(self) -> dict[str, Any]:
        import docker

        policy: dict[str, Any] = {"Name": self.restart_policy}
        kw: dict[str, Any] = dict(image=self.image, command=self.args or None, name=self.container_name, detach=True,
                                  labels=self.labels(), restart_policy=policy, network_mode="host",
                                  environment=self.env, init=True)  # tini: SIGTERM reaches the server
        if self.ipc_host:
            kw["ipc_mode"] = "host"
        if self.shm_size:
            kw["shm_size"] = self.shm_size
        if self.cpus:  # `docker run --cpus`: Docker's API takes billionths of a CPU
            kw["nano_cpus"] = round(self.cpus * 1e9)
        if self.volumes:
            kw["volumes"] = self.volumes
        if isinstance(self.gpus, list):  # the devices themselves (indices or UUIDs), as `docker run --gpus '"device=0,1"'`
            kw["device_requests"] = [docker.types.DeviceRequest(device_ids=[str(g) for g in self.gpus],
                                                                capabilities=[["gpu"]])]
        elif self.gpus:
            count = -1 if self.gpus == "all" else int(self.gpus)
            kw["device_requests"] = [docker.types.DeviceRequest(count=count, capabilities=[["gpu"]])]
        return kw

    def start(self) -> None:
        """Create and start the container; a leftover of ours with the same name is replaced."""
        import docker

        try:
            old = self.client.containers.get(self.container_name)
        except docker.errors.NotFound:
            old = None
        if old is not None:
            if LABEL_TARGET not in (old.labels or {}):
                raise TargetError(f"a container named {self.container_name} exists and is not ours (no llm-chaos labels)",
                                  target=self.name)
            if old.labels.get(LABEL_RUN) == self.run_id and old.status == "running":
                self._container = old
                return
            if old.labels.get(LABEL_RUN) == self.run_id:  # our replica, re-created: keep its count
                self._carried_restarts += int(old.attrs.get("RestartCount", 0)) + 1
            old.remove(force=True)
        try:
            self._container = self.client.containers.run(**self._run_kwargs())
        except docker.errors.ImageNotFound:
            raise TargetError(f"image {self.image} not found on the engine (build it: scripts/build-image.sh)",
                              target=self.name) from None
        except docker.errors.APIError as e:
            raise TargetError(f"cannot start container: {e.explanation or e}", target=self.name) from None

    def stop(self, timeout: float = 10.0) -> None:
        c = self.container
        if c.status == "paused":
            c.unpause()
        c.stop(timeout=int(timeout))

    def remove(self) -> None:
        """Delete the container (force)."""
        import docker

        try:
            self.client.containers.get(self.container_name).remove(force=True)
        except docker.errors.NotFound:
            pass
        self._container = None

    def restart(self) -> None:
        c = self.container
        if c.status == "paused":
            c.unpause()
        auto = int(c.attrs.get("RestartCount", 0))
        c.restart(timeout=10)
        self._manual_restarts += 1
        # Docker zeroes RestartCount on a manual (re)start: carry what it had counted
        self._carried_restarts += max(0, auto - int(self.container.attrs.get("RestartCount", 0)))

    def kill(self, sig: int = _signal.SIGKILL) -> None:
        """Signal the container's init process as its host's kernel sees it, so Docker sees a crash
        and applies the restart policy: `docker kill` counts as a manual stop, and the policy never
        fires. docker_procs.send: os.kill from here on a local engine, else from a throw-away container
        in the host's PID namespace; a signal sent from inside the container would not do, since a PID
        namespace's init ignores SIGKILL from within."""
        c = self.container
        pid = c.attrs["State"]["Pid"]
        if not pid:
            raise TargetError(f"container {self.container_name} has no running process to kill", target=self.name)
        p = docker_procs.find(c, int(pid), target=self.name)
        if p is None:
            return  # it died on its own meanwhile: the fault's check judges what happened
        try:
            docker_procs.send(self.client, c, p, int(sig), remote=self.remote,
                              labels=self._labels_for(f"kill -{int(sig)}"), target=self.name)
        except ProcessLookupError:
            pass

    def pause(self) -> None:
        self.container.pause()

    def resume(self) -> None:
        self.container.unpause()

    def paused(self) -> bool:
        return bool(self.container.status == "paused")

    def is_running(self) -> bool:
        return self.container.status in ("running", "paused")

    def pid(self) -> int | None:
        pid = self.container.attrs["State"]["Pid"]
        return int(pid) if pid else None

    def restart_count(self) -> int:
        return int(self.container.attrs.get("RestartCount", 0)) + self._manual_restarts + self._carried_restarts

    def health(self) -> bool:
        return http_health(self.host, self.port)

    def wait_healthy(self, timeout: float = 60.0) -> None:
        wait_until(self.health, timeout, what="/health 200", target=self.name, sleep=self._sleep, logs=lambda: self.logs(20))

    def logs(self, tail: int = 100) -> str:
        text: str = self.container.logs(tail=tail).decode(errors="replace")
        return text

    def exec(self, cmd: list[str]) -> tuple[int, str]:
        """(exit code, output) of cmd in the container, all of its output (not exec_run: docker_exec says
        why). The caller checks the exit code (docker_exec.exec_checked raises on one that is not 0)."""
        from chaos.targets.docker_exec import exec_collect

        return exec_collect(self.client, self.container.id, cmd, target=self.name)

    def exec_checked(self, cmd: list[str]) -> str:
        """The output of cmd in the container; one that fails (or cannot start) is a TargetError
        naming the container and the command, never output to parse."""
        rc, out = self.exec(cmd)
        if rc != 0:
            raise TargetError(f"`{' '.join(cmd)}` in container {self.container_name} exited {rc}: "
                              f"{out.strip()[:300]}", target=self.name)
        return out

    def processes(self) -> list[tuple[int, str]]:
        """(host pid, command line or title) of every process in the container, from `docker top`."""
        return [(p.pid, p.cmd) for p in self._top()]

    def _top(self) -> list[docker_procs.HostProc]:
        return docker_procs.top(self.container, target=self.name)

    def _main(self, procs: list[tuple[int, str]]) -> int | None:
        return titles.sim_main(procs) or self.pid()

    def rank_pids(self) -> list[int]:
        """Ranks, rank 0 first (titles.rank_pids: vLLM's workers, or the simulator's engine + ranks)."""
        procs = self.processes()
        return titles.rank_pids(procs, self._main(procs))

    def rank_pid(self, tp_rank: int | None = None, pp_rank: int | None = None, dp_rank: int | None = None) -> int:
        """The one worker of these ranks (titles.select_worker: a rank left open must be unambiguous)."""
        procs = self.processes()
        return titles.select_worker(procs, self._main(procs), tp=tp_rank, pp=pp_rank, dp=dp_rank)

    def engine_pid(self, dp_rank: int | None = None) -> int | None:
        """vLLM's `VLLM::EngineCore[_DPn]`, or the simulator's main process (its engine)."""
        procs = self.processes()
        return titles.engine_pid(procs, self._main(procs), dp_rank)

    def _labels_for(self, what: str) -> dict[str, str]:
        return {LABEL_RUN: self.run_id, "llm-chaos.helper": f"{what} {self.name}"}

    def signal(self, pid: int, sig: int) -> None:
        """Signal host pid `pid`, only while it is a process of this container (docker_procs.send)."""
        c = self.container
        p = docker_procs.find(c, pid, target=self.name)
        if p is None:  # restarting or exited, or not one of ours
            raise ProcessLookupError(f"no pid {pid} in container {self.container_name} ({c.status})")
        docker_procs.send(self.client, c, p, sig, remote=self.remote,
                          labels=self._labels_for(_signal.Signals(sig).name), target=self.name)

    def undo_signal(self, pid: int, start: int | None, sig: int) -> dict[str, Any]:
        """The ledger step that sends `sig` to this process later, if it is still the same one."""
        return docker_procs.undo_step(self.docker_host, self.container_name, pid, start, sig, remote=self.remote,
                                      target=self.name)

    def proc_state(self, pid: int) -> str | None:
        p = docker_procs.find(self.container, pid, target=self.name)
        return p.state if p else None

    def proc_start(self, pid: int) -> int | None:
        """The start time of pid (seconds, from the host's ps): with the pid, the process's identity, so
        an undo step replayed later never signals a newer process that reused the pid."""
        p = docker_procs.find(self.container, pid, target=self.name)
        return p.start if p else None

    def __enter__(self) -> DockerTarget:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()
