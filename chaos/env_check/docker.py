"""`chaos env check --probe` for docker targets: each engine answers, and each container the file names
exists there with the restart policy the file claims (the harness restarts, kills and signals an
existing container, so a wrong name or policy breaks the run, or its verdict, later)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chaos.env import Environment, Target
from chaos.env_check.http import Probe


def _one_line(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _engine(make: Callable[[str | None], Any], host: str | None, timeout: float) -> tuple[Any, Probe]:
    """(client or None, the engine's line)."""
    from chaos.errors import ChaosError

    try:
        client = make(host)
        client.api.timeout = timeout
        version = client.version().get("Version", "?")
    except ChaosError as e:
        return None, Probe("docker engine", host or "local", False, str(e).splitlines()[0])
    except Exception as e:  # the SDK raises many kinds (ssh, socket, API); each is one line here
        return None, Probe("docker engine", host or "local", False, _one_line(e))
    return client, Probe("docker engine", host or "local", True, f"engine {version}")


def _container(client: Any, t: Target) -> Probe:
    import docker

    engine = t.docker_host or "local"
    what, where = f"container of {t.name}", f"{t.container_name} on {engine}"
    expected = f"expected container {t.container_name!r} on {engine} with restart policy {t.restart_policy!r}"
    if client is None:
        return Probe(what, where, False, f"{expected}; cannot look: the engine does not answer")
    try:
        c = client.containers.get(t.container_name)
    except docker.errors.NotFound:
        return Probe(what, where, False, f"{expected}; the engine has no container by that name")
    except Exception as e:  # an API or transport error: one line
        return Probe(what, where, False, f"{expected}; {_one_line(e)}")
    # Docker reports the default policy as "no" (older engines: "")
    got = ((c.attrs.get("HostConfig") or {}).get("RestartPolicy") or {}).get("Name") or "no"
    if got != t.restart_policy:
        return Probe(what, where, False, f"{expected} (the file's); the container has {got!r}")
    return Probe(what, where, True, f"{c.status}, restart policy {got}")


def check_containers(env: Environment, timeout: float, *, client: Callable[[str | None], Any] | None = None) -> list[Probe]:
    """Each engine once, then each docker target's named container on it. A target without
    container_name gets its container at run time (chaos-<run>-<name>): only its engine is checked."""
    if client is None:
        from chaos.targets.docker_client import client_for

        client = client_for
    out: list[Probe] = []
    engines: dict[str | None, Any] = {}
    for t in env.targets:
        if t.kind != "docker":
            continue
        if t.docker_host not in engines:
            engines[t.docker_host], line = _engine(client, t.docker_host, timeout)
            out.append(line)
        if t.container_name:
            out.append(_container(engines[t.docker_host], t))
    return out
