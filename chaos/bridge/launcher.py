"""The embedded stack: a real Toxiproxy, simulator replicas (processes or containers), the gateway.

    client -> toxiproxy[client] -> gateway -> toxiproxy[replica-x] -> fault proxy[replica-x] -> replica-x (TP engine)
                                                    replica-x engine -> toxiproxy[rank link] -> rank worker

Everything started here is written to the state dir (pidfiles, logs) so `chaos cleanup` can reap
it after a SIGKILLed run; teardown always runs in reverse order of start.
"""
from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from chaos.bridge.progress_keeper import ProgressKeeper
from chaos.env import Environment
from chaos.errors import StackError
from chaos.faults.proxy_admin import token_ref
from chaos.observe.completion import completion_ok, wait_completion
from chaos.shared import proc as _proc
from chaos.stack.faultproxy import FaultProxyServer
from chaos.stack.monitoring import http_ok
from chaos.stack.toxiproxy import ToxiproxyServer
from chaos.targets import Target, make_target
from chaos.targets.process import ProcessTarget
from chaos.targets.startup import StartupWatch, wait_all_healthy


class EmbeddedStack:
    """Starts and stops the stack an embedded Environment describes."""

    def __init__(self, env: Environment, *, run_id: str | None = None,
                 log: Callable[[str], None] = lambda s: None) -> None:
        if env.embedded == "none":
            raise StackError(f"environment {env.name!r} is not embedded (embedded: none); nothing to start")
        self.env = env
        self.run_id = run_id or f"{env.name}-{uuid.uuid4().hex[:8]}"
        self.state_dir = Path(env.state_dir)
        self.log = log
        self.toxiproxy: ToxiproxyServer | None = None
        self.targets: dict[str, Target] = {}
        self.gateway: ProcessTarget | None = None
        self.keeper: ProgressKeeper | None = None  # restarts what the gateway ejected for no decode progress
        self.fault_proxies: dict[str, FaultProxyServer] = {}
        self.started_at: float | None = None
        self.warm_rate: float | None = None  # completions/s the warm-up got through the client endpoint

    # -- lifecycle ---------------------------------------------------------------------------
    def up(self, timeout: float | None = None) -> EmbeddedStack:
        """Start everything and wait until a real completion succeeds through the client proxy.

        Default wait: the environment's cold-start SLA (a real vLLM replica takes a minute here)."""
        timeout = timeout or self.env.slas.cold_start_s
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.started_at = time.time()
        try:
            self._start_toxiproxy()
            watch = self._start_targets(timeout)
            self._start_fault_proxies()
            self._start_gateway(timeout, watch)
            self.wait_serving(timeout, watch=watch)
            self._wait_each_serving(timeout, watch)
            self.warm_up(self.env.warmup_s, watch=watch)
        except BaseException:
            self.down()
            raise
        self._write_status()
        return self

    def _start_toxiproxy(self) -> None:
        if self.env.toxiproxy is None:
            return
        self.toxiproxy = ToxiproxyServer.for_api(self.env.toxiproxy.api, log_path=self.state_dir / "toxiproxy.log")
        self.toxiproxy.start()
        assert self.toxiproxy.proc is not None
        self._pidfile("toxiproxy", self.toxiproxy.proc.pid)
        self.toxiproxy.create_proxies(self.env.toxiproxy.proxies)
        self.log(f"toxiproxy up on {self.toxiproxy.api} with {len(self.env.toxiproxy.proxies)} proxies")

    def _start_targets(self, timeout: float) -> StartupWatch:
        """Start the replicas and wait for their /health; the watch that fails the start once one cannot start."""
        for cfg in self.env.targets:
            self.targets[cfg.name] = make_target(cfg, run_id=self.run_id, state_dir=self.state_dir, env=self.env)
        for t in self.targets.values():
            t.start()
        watch = StartupWatch(self.targets, where=f"stack {self.env.name!r}")
        wait_all_healthy(self.targets, timeout, watch)
        self.log(f"replicas healthy: {', '.join(self.targets)}")
        return watch

    def _start_fault_proxies(self) -> None:
        for cfg in self.env.fault_proxies:
            server = FaultProxyServer.for_config(cfg, token_ref(self.env, cfg), self.state_dir)
            self.fault_proxies[cfg.name] = server.start()
            assert server.proc is not None
            self._pidfile(f"faultproxy-{cfg.name}", server.proc.pid)
        if self.fault_proxies:
            self.log(f"fault proxies up: {', '.join(f'{n} ({p.url})' for n, p in self.fault_proxies.items())}")

    def _start_gateway(self, timeout: float, watch: StartupWatch | None = None) -> None:
        if self.env.gateway is None:
            return
        host, port = self.env.gateway.listen.rsplit(":", 1)
        from chaos.stack.thirdparty import GatewayProcess, gateway_process

        if self.env.gateway.kind == "reference":
            spec = GatewayProcess([sys.executable, "-m", "chaos.cli", "gateway", "--env", self.env.source])
        else:
            spec = gateway_process(self.env, self.state_dir)
        self.gateway = ProcessTarget("gateway", spec.command, host=host, port=int(port), restart_policy="always",
                                     state_dir=self.state_dir, run_id=self.run_id, env=spec.environ,
                                     health_path=spec.health_path)
        self.gateway.start()
        if watch is not None:
            watch.add("gateway", self.gateway)
        wait_all_healthy({"gateway": self.gateway}, timeout, watch)
        self.log(f"gateway ({self.env.gateway.kind}) up on {self.env.gateway.listen}")
        gw = self.env.gateway
        if gw.kind == "reference" and gw.reference.progress_eject_s > 0:
            self.keeper = ProgressKeeper(f"http://{gw.listen}", gw.admin_token, self.targets, log=self.log).start()

    def wait_serving(self, timeout: float | None = None, *, watch: StartupWatch | None = None) -> float:
        """Block until a real completion succeeds at the client endpoint; returns seconds waited.

        With a watch, a replica that cannot start fails the wait at once (StackError naming it)."""
        timeout = timeout or self.env.slas.cold_start_s
        waited = wait_completion(self.env.endpoints.api, self.env.endpoints.model, timeout,
                                 api_key=self.env.endpoints.api_key, check=watch.check if watch else None)
        if waited is not None:
            return waited
        troubled = watch.troubled() if watch is not None else ""
        raise StackError(f"stack {self.env.name!r}: no completion succeeded at {self.env.endpoints.api} "
                         f"within {timeout:g}s; logs in {self.state_dir}{'; ' + troubled if troubled else ''}")

    def _wait_each_serving(self, timeout: float, watch: StartupWatch) -> None:
        """Every replica serves a completion itself: the gateway serves through the others while one dies at
        each request it gets, and that one has not started."""
        model, key = self.env.endpoints.model, self.env.endpoints.api_key
        for name in self.targets:
            cfg = self.env.target(name)
            if wait_completion(f"http://{cfg.host}:{cfg.port}", model, timeout, api_key=key, check=watch.check,
                               request_timeout=min(30.0, timeout)) is None:
                troubled = watch.troubled()
                raise StackError(f"stack {self.env.name!r}: replica {name} served no completion within {timeout:g}s; "
                                 f"logs in {self.state_dir}{'; ' + troubled if troubled else ''}")

    def warm_up(self, seconds: float, workers: int = 8, *, watch: StartupWatch | None = None) -> int:
        """Send real traffic for a while, then reset the gateway's breaker windows.

        A fresh replica's first requests are slow and its memory grows in steps while it warms
        up; tests must start from the steady state, not from that."""
        if seconds <= 0:
            return 0
        deadline = time.monotonic() + seconds
        api, model, key = self.env.endpoints.api, self.env.endpoints.model, self.env.endpoints.api_key

        from chaos.load.workloads import MixWorkload

        def loop(i: int) -> int:
            n, work = 0, MixWorkload(dict(self.env.load.mix), dict(self.env.load.classes), seed=i)  # the real prompt sizes
            while time.monotonic() < deadline:
                if watch is not None:
                    watch.check()
                prompt = work.next()
                assert prompt is not None  # a mix workload never runs out
                n += completion_ok(api, model, timeout=10.0, api_key=key, prompt=prompt.text)
            return n

        with ThreadPoolExecutor(workers) as pool:
            sent = sum(pool.map(loop, range(workers)))
        self.warm_rate = sent / seconds
        self._reset_gateway()
        self.log(f"warmed up with {sent} completions in {seconds:g}s")
        return sent

    def _reset_gateway(self) -> None:
        gw = self.env.gateway
        if gw is None or not self.env.endpoints.gateway_admin:
            return
        headers = {"Content-Type": "application/json"}
        if gw.admin_token:
            headers["Authorization"] = f"Bearer {gw.admin_token}"
        req = urllib.request.Request(f"{self.env.endpoints.gateway_admin}/admin/reset", data=b"{}", headers=headers)
        with urllib.request.urlopen(req, timeout=5):
            pass

    def down(self) -> None:
        """Stop everything that was started, in reverse order; never raises for one stuck part."""
        errors: list[str] = []
        if self.keeper is not None:
            errors += _attempt(self.keeper.stop, "progress keeper")
            self.keeper = None
        if self.gateway is not None:
            errors += _attempt(lambda: self.gateway.remove() if self.gateway else None, "gateway")
            self.gateway = None
        for name, t in reversed(list(self.targets.items())):
            errors += _attempt(partial(_resume_if_paused, t), name)
            errors += _attempt(t.remove, name)
        self.targets.clear()
        for name, fp in reversed(list(self.fault_proxies.items())):
            errors += _attempt(fp.stop, f"fault proxy {name}")
            self._unlink_own(self.state_dir / "targets" / f"faultproxy-{name}.pid")
        self.fault_proxies.clear()
        if self.toxiproxy is not None:
            errors += _attempt(self.toxiproxy.stop, "toxiproxy")
            self.toxiproxy = None
        # only what this stack wrote: a failed second `up` on the same state dir must not erase the
        # pidfile and status of the stack that runs there (cleanup needs them after a crash)
        self._unlink_own(self.state_dir / "targets" / "toxiproxy.pid")
        self._unlink_own(self.state_dir / "stack.json")
        if errors:
            self.log("teardown problems: " + "; ".join(errors))

    def __enter__(self) -> EmbeddedStack:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()

    # -- state ---------------------------------------------------------------------------------
    def target(self, name: str) -> Target:
        if name not in self.targets:
            raise StackError(f"stack has no target {name!r} (targets: {', '.join(self.targets) or 'none'})")
        return self.targets[name]

    def request_logs(self) -> list[Path]:
        """The simulator request logs (ground truth) of every replica."""
        return sorted(self.state_dir.glob("*.requests.jsonl"))

    def proxy_logs(self) -> list[Path]:
        """The fault proxies' request logs (the replica side's record, on any backend)."""
        return sorted(self.state_dir.glob("*.proxy.jsonl"))

    def _pidfile(self, name: str, pid: int) -> None:
        d = self.state_dir / "targets"
        d.mkdir(parents=True, exist_ok=True)
        info = {"target": name, "pid": pid, "pgid": pid, "start": _proc.start_time(pid), "run_id": self.run_id,
                "owner": {"pid": os.getpid(), "start": _proc.start_time(os.getpid())}}
        (d / f"{name}.pid").write_text(json.dumps(info))

    def _unlink_own(self, path: Path) -> None:
        try:
            if json.loads(path.read_text() or "{}").get("run_id") != self.run_id:
                return
        except (OSError, ValueError):
            return
        path.unlink(missing_ok=True)

    def _write_status(self) -> None:
        status = {"run_id": self.run_id, "env": self.env.name, "started_at": self.started_at, "owner": os.getpid(),
                  "owner_start": _proc.start_time(os.getpid()), "api": self.env.endpoints.api,
                  "targets": {n: t.pid() for n, t in self.targets.items()}}
        tmp = self.state_dir / "stack.json.tmp"
        tmp.write_text(json.dumps(status))
        os.replace(tmp, self.state_dir / "stack.json")  # atomic: `env up --detach` polls this file


def start_embedded(env: Environment) -> EmbeddedStack:
    """The environment's embedded stack, started (what a Session's start_stack is for an embedded environment)."""
    return EmbeddedStack(env).up()


def _resume_if_paused(t: Target) -> None:
    if t.paused():
        t.resume()


def _attempt(fn: Callable[[], object], what: str) -> list[str]:
    try:
        fn()
        return []
    except Exception as e:  # teardown goes on: one stuck part must not leave the rest running
        return [f"{what}: {e}"]


def status(env: Environment) -> dict[str, object]:
    """What answers right now: toxiproxy, each replica's /health, the gateway, a real completion."""
    from chaos.targets.base import http_health

    out: dict[str, object] = {}
    if env.toxiproxy is not None:
        out["toxiproxy"] = http_ok(f"{env.toxiproxy.api}/version")
    for p in env.fault_proxies:
        out[f"fault proxy {p.name}"] = http_ok(f"{p.admin_url}/_chaos/health")
    for t in env.targets:
        out[t.name] = http_health(t.host, t.port)
    if env.gateway is not None:
        host, port = env.gateway.listen.rsplit(":", 1)
        out["gateway"] = http_health(host, int(port))
    out["completion"] = completion_ok(env.endpoints.api, env.endpoints.model, timeout=3.0,
                                      api_key=env.endpoints.api_key)
    return out
