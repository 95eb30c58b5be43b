"""The simulator's admin call delivered from inside its own container, for a replica on another host.

The simulator's admin API answers only callers on its host's loopback: a planted fault is not for the
network. A replica on a remote Docker engine is reached as the harness reaches its containers for every
other fault: through that engine (over the SSH tunnel). The call runs in the replica's own container with
the image's python (the simulator is Python; a stripped image keeps it), from a socket bound to
127.0.0.1, to the address the simulator serves on. The container runs on the host network (DockerTarget),
so the kernel routes that connection over the host's loopback and the API sees a loopback caller: nothing
is opened to the network, and only what runs on that host can do the same. The token travels in the
exec's environment, never on its command line (which `docker top` and the engine's events show).
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from chaos.errors import TargetError
from chaos.faults.tokens import TokenRef, from_record

if TYPE_CHECKING:
    from chaos.targets.docker import DockerTarget

TOKEN_VAR = "CHAOS_ADMIN_TOKEN"
NOT_ANSWERING = 3  # the script's exit code when nothing listens at the address (the process died)
# stdlib only, one JSON line out: {"status": ..., "body": ...} or {"error": ...}; TOKEN_VAR and NOT_ANSWERING
# spelled out (the script is a literal; tests/integration/faults/test_sim_exec_script.py runs it)
SCRIPT = """\
import http.client, json, os, sys
method, host, port, path, body = sys.argv[1:6]
try:
    c = http.client.HTTPConnection(host, int(port), timeout=5, source_address=("::1" if ":" in host else "127.0.0.1", 0))
    c.request(method, path, body=body.encode() or None, headers={"Content-Type": "application/json",
              "Authorization": "Bearer " + os.environ.get("CHAOS_ADMIN_TOKEN", "")})
    r = c.getresponse()
    print(json.dumps({"status": r.status, "body": r.read(4000).decode(errors="replace")}))
except OSError as e:
    print(json.dumps({"error": str(e) or type(e).__name__}))
    sys.exit(3)
"""


class NotAnswering(TargetError):
    """Nothing answered the admin call inside the container (or the container is not running)."""


def command(method: str, url: str, body: Any = None) -> list[str]:
    """The exec's command line: the script and where it calls (no token)."""
    u = urlparse(url)
    if not u.hostname or not u.port:
        raise TargetError(f"admin url {url!r}: expected http://host:port/path")
    path = u.path + (f"?{u.query}" if u.query else "")
    return ["python3", "-c", SCRIPT, method, u.hostname, str(u.port), path or "/",
            json.dumps(body) if body is not None else ""]


def call(client: Any, container: str, method: str, url: str, token: TokenRef | None, body: Any = None, *,
         target: str | None = None) -> tuple[int, str]:
    """(HTTP status, body) of `method url` made from inside `container` with a loopback source; NotAnswering
    when nothing listens there or the container is not running; TargetError when the call cannot be made
    (no python3 in the image, say), naming the container and the command."""
    import requests

    import docker
    from chaos.targets.docker_exec import exec_collect

    cmd = command(method, url, body)
    env = {TOKEN_VAR: token.value()} if token is not None else None
    try:
        rc, out = exec_collect(client, container, cmd, environment=env, target=target)
    except (docker.errors.APIError, requests.exceptions.RequestException) as e:
        why = (getattr(e, "explanation", None) or str(e)).splitlines()[0]
        raise NotAnswering(f"container {container}: cannot exec there ({why})", target=target) from None
    last = out.strip().splitlines()[-1] if out.strip() else ""
    try:
        got = json.loads(last)
    except ValueError:
        got = None
    if rc == NOT_ANSWERING and isinstance(got, dict):
        raise NotAnswering(f"{url} in container {container}: not answering ({got.get('error')})", target=target)
    if rc != 0 or not isinstance(got, dict) or "status" not in got:
        raise TargetError(f"`python3 -c <admin call> {method} {url}` in container {container} exited {rc}: "
                          f"{out.strip()[:300]}", target=target)
    return int(got["status"]), str(got.get("body", ""))


def undo_step(via: DockerTarget, method: str, url: str, token: TokenRef) -> dict[str, Any]:
    """The ledger's step for an admin call made in `via`'s container: enough to replay with no memory."""
    return {"kind": "container_http", "container": via.container_name, "docker_host": via.docker_host,
            "method": method, "url": url, "auth": token.describe()}


def replay(step: dict[str, Any]) -> str:
    """Perform a container_http undo step; a container gone or stopped has nothing left to undo."""
    from chaos.targets.docker_client import client_for

    where, what = step["container"], f"{step['method']} {step['url']}"
    client = client_for(step.get("docker_host"))
    try:
        status, _ = call(client, where, step["method"], step["url"], from_record(step.get("auth")), step.get("body"))
    except NotAnswering as e:
        return f"{what}: {e}; nothing to undo"
    finally:
        client.close()
    return f"{what} from inside container {where} -> {status}"


__all__ = ["NotAnswering", "call", "command", "replay", "undo_step"]
