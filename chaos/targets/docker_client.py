"""The docker engine a target lives on: one SDK client per engine (local socket, tcp:// or ssh://) and the
labels every container and helper the harness creates carries (run id, target, state dir)."""
from __future__ import annotations

import os
from typing import Any

from chaos.errors import TargetError

LABEL_RUN, LABEL_TARGET, LABEL_STATE = "llm-chaos.run-id", "llm-chaos.target", "llm-chaos.state-dir"


def client_for(docker_host: str | None = None) -> Any:
    """A docker SDK client: the explicit host, else DOCKER_HOST/the local socket (TargetError if down).

    An ssh:// host goes through the system ssh client (chaos.targets.ssh_docker), not paramiko."""
    import docker

    host = docker_host or os.environ.get("DOCKER_HOST") or None
    try:
        if host and host.startswith("ssh://"):
            from chaos.targets import ssh_docker

            c = docker.DockerClient(base_url=ssh_docker.local_url(host), timeout=60)
        else:
            c = docker.DockerClient(base_url=host, timeout=60) if host else docker.from_env(timeout=60)
        c.ping()
        return c
    except TargetError:
        raise
    except Exception as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise TargetError(f"docker engine {host or 'local'} not reachable: {why}") from None
