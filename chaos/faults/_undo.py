"""Undo steps the ledger can replay with no harness memory; each returns what it did."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from http.client import HTTPException
from typing import Any

from chaos.errors import ChaosError, FaultError
from chaos.faults import tokens
from chaos.shared import proc as _proc
from chaos.shared.toxiproxy import Toxiproxy, ToxiproxyError

TOXIC_PREFIX = "chaos-"


def toxic(api: str, proxy: str, name: str) -> dict[str, Any]:
    return {"kind": "toxic", "api": api, "proxy": proxy, "toxic": name}


def proxy_enable(api: str, proxy: str) -> dict[str, Any]:
    return {"kind": "proxy_enable", "api": api, "proxy": proxy}


def send_signal(pid: int, sig: int, *, group: bool = False, target: str | None = None) -> dict[str, Any]:
    return {"kind": "signal", "pid": pid, "start": _proc.start_time(pid), "signal": signal.Signals(sig).name,
            "group": group, "target": target}


def docker(container: str, action: str, docker_host: str | None) -> dict[str, Any]:
    return {"kind": "docker", "container": container, "action": action, "docker_host": docker_host}


def http(method: str, url: str, headers: dict[str, str] | None = None, body: Any = None, *,
         auth: dict[str, Any] | None = None) -> dict[str, Any]:
    """An HTTP call; `auth` names where the Bearer token comes from (TokenRef.describe()), never the token."""
    if headers and any(k.lower() == "authorization" for k in headers):
        raise ValueError("an undo step must not carry an Authorization header; pass auth= (the token's source)")
    return {"kind": "http", "method": method, "url": url, "headers": headers or {}, "body": body, "auth": auth}


def run(step: dict[str, Any]) -> str:
    """Perform one undo step; idempotent (already undone is success)."""
    kind = step.get("kind")
    if kind == "toxic":
        gone = Toxiproxy(step["api"]).remove_toxic(step["proxy"], step["toxic"])
        return f"{'removed' if gone else 'already gone:'} toxic {step['toxic']} on {step['proxy']} ({step['api']})"
    if kind == "proxy_enable":
        Toxiproxy(step["api"]).set_enabled(step["proxy"], True)
        return f"enabled proxy {step['proxy']} ({step['api']})"
    if kind == "signal":
        return _signal(step)
    if kind == "docker":
        return _docker(step)
    if kind == "docker_signal":
        from chaos.targets import docker_procs

        return docker_procs.replay(step)
    if kind == "container_signal":  # ledgers of earlier releases: a pid inside the container, through exec
        return _container_signal(step)
    if kind == "http":
        return _http(step)
    if kind == "container_http":  # an admin call made from inside a replica's container (sim_exec)
        from chaos.faults.sim_exec import replay as replay_in_container

        return replay_in_container(step)
    if kind == "engine_plugin":
        return _engine_plugin(step)
    if kind == "none":
        note: str = step.get("note", "nothing to undo")
        return note
    raise ValueError(f"unknown undo step kind {kind!r}")


def _signal(step: dict[str, Any]) -> str:
    pid, sig = int(step["pid"]), signal.Signals[step["signal"]]
    if not _proc.alive(pid, step.get("start")):
        return f"pid {pid} gone; no {sig.name} needed"
    if step.get("group"):
        os.killpg(os.getpgid(pid), sig)
    else:
        os.kill(pid, sig)
    return f"sent {sig.name} to {'group of ' if step.get('group') else ''}pid {pid}"


def _docker(step: dict[str, Any]) -> str:
    import docker as sdk
    from chaos.targets.docker_client import client_for

    client = client_for(step.get("docker_host"))  # ssh:// goes through the system ssh client
    try:
        try:
            c = client.containers.get(step["container"])
        except sdk.errors.NotFound:
            return f"container {step['container'][:12]} gone"
        action = step["action"]
        if c.status == "paused" and action in ("unpause", "start"):
            c.unpause()
        elif action == "start" and c.status != "running":
            c.start()
        return f"container {c.name}: {action} (was {c.status})"
    finally:
        client.close()


def _container_signal(step: dict[str, Any]) -> str:
    import docker as sdk
    from chaos.targets.docker_client import client_for
    from chaos.targets.docker_exec import exec_collect

    pid, sig, where = int(step["pid"]), signal.Signals[step["signal"]], step["container"]
    client = client_for(step.get("docker_host"))
    try:
        try:
            c = client.containers.get(where)
        except sdk.errors.NotFound:
            return f"container {where} gone; no {sig.name} needed"
        if c.status != "running":
            return f"container {where} is {c.status}; no {sig.name} needed"
        # the shell's builtins only: no cat or kill binary needed in the container
        probe = f"read -r s < /proc/{pid}/stat && echo \"$s\""
        rc, text = exec_collect(client, c.id, ["sh", "-c", probe])
        fields = text[text.rindex(")") + 2:].split() if rc == 0 and ")" in text else None
        if fields is None or (step.get("start") is not None and int(fields[19]) != int(step["start"])):
            return f"pid {pid} in {where} gone; no {sig.name} needed"
        cmd = f"kill -{sig.name[3:]} {pid}"
        rc, out = exec_collect(client, c.id, ["sh", "-c", cmd])
        if rc != 0:
            raise ChaosError(f"`sh -c '{cmd}'` in container {where} exited {rc}: {out.strip()[:200]}")
        return f"sent {sig.name} to pid {pid} in container {where}"
    finally:
        client.close()


def _http(step: dict[str, Any]) -> str:
    data = json.dumps(step["body"]).encode() if step.get("body") is not None else None
    req = urllib.request.Request(step["url"], data=data, method=step["method"], headers=step.get("headers") or {})
    req.add_header("Content-Type", "application/json")
    ref = tokens.from_record(step.get("auth"))
    if ref is not None:
        req.add_header("Authorization", f"Bearer {ref.value()}")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return f"{step['method']} {step['url']} -> {r.status}"
    except urllib.error.HTTPError as e:
        return f"{step['method']} {step['url']} -> {e.code}"
    except (urllib.error.URLError, HTTPException, OSError) as e:
        return f"{step['method']} {step['url']}: not answering ({getattr(e, 'reason', e)}); nothing to undo"


def sweep_toxics(env: Any) -> list[str]:
    """Remove every chaos-* toxic on the environment's Toxiproxy (belt and braces for the ledger)."""
    cfg = getattr(env, "toxiproxy", None)
    if cfg is None:
        return []
    client = Toxiproxy(cfg.api, timeout=2.0)
    out = []
    try:
        for name, proxy in client.proxies().items():
            for t in proxy.get("toxics", []) or []:
                if str(t.get("name", "")).startswith(TOXIC_PREFIX):
                    client.remove_toxic(name, t["name"])
                    out.append(f"swept toxic {t['name']} on {name}")
    except ToxiproxyError:
        pass  # toxiproxy not running: nothing can be left on it
    return out


def _engine_plugin(step: dict[str, Any]) -> str:
    """Perform an engine_plugin undo step (idempotent: a file already gone is success)."""
    # imported here: `chaos.faults` (and so the pytest plugin) loads where the engine plugin's package is not
    # installed, as in a wheel of chaos/ alone; only a ledger with an engine-plugin step needs it
    from chaos_engine_plugin.control import remove_command

    cmd = remove_command(step["dir"], step["id"])
    if step.get("container"):
        import docker as sdk
        from chaos.targets.docker_client import client_for
        from chaos.targets.docker_exec import exec_collect

        client = client_for(step.get("docker_host"))
        try:
            try:
                c = client.containers.get(step["container"])
            except sdk.errors.NotFound:
                return f"container {step['container']} gone; engine fault {step['id']} gone with it"
            if c.status != "running":
                return f"container {step['container']} is {c.status}; engine fault {step['id']} cannot act"
            rc, out = exec_collect(client, c.id, cmd)
            if rc != 0:
                raise FaultError(f"`{' '.join(cmd)}` in container {step['container']} exited {rc}: {out.strip()[:200]}")
        finally:
            client.close()
        return f"disarmed engine fault {step['id']} in container {step['container']}"
    path = os.path.join(step["dir"], f"{step['id']}.json")
    if not os.path.exists(path):
        return f"engine fault {step['id']} of {step.get('target')} already disarmed"
    subprocess.run(cmd, check=True, timeout=30)
    return f"disarmed engine fault {step['id']} of {step.get('target')}"
