"""The proof: a harness injecting faults is SIGINT/SIGTERM/SIGHUP/SIGKILLed at seeded random moments; afterwards
(after `cleanup` for SIGKILL) no toxic is left, no process is stopped, no container is paused."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaos.faults.ledger import Ledger, cleanup
from chaos.faults.proxy_admin import FaultProxyAdmin
from chaos.shared import proc as _proc
from tests._support import REPO, free_port

HARNESS = str(Path(__file__).with_name("proof_harness.py"))
ROUNDS = int(os.environ.get("CHAOS_PROOF_ROUNDS", "15"))


def _docker_container(request):
    try:
        from tests._support import require

        require("image:llm-chaos-base:bookworm")
    except pytest.skip.Exception:
        return None
    import docker

    client = docker.from_env()
    name = f"chaos-proof-{os.getpid()}"
    c = client.containers.run("llm-chaos-base:bookworm", ["sleep", "300"], name=name, detach=True,
                              labels={"llm-chaos.run-id": "proof", "llm-chaos.target": "proof-docker"})
    request.addfinalizer(lambda: c.remove(force=True))
    return c


def _default_signals() -> None:
    # as from a terminal: a CI job started under nohup (SIGHUP ignored) or in the background of a
    # script (SIGINT ignored) passes those on, and the SIGHUP and SIGINT rounds would prove nothing
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def _tiny_pids(port: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit() and str(port) in _proc.cmdline(int(name)) and "tinyserver" in _proc.cmdline(int(name)):
            out.append(int(name))
    pids = list(out)
    for p in out:
        pids += _proc.children(p)
    return sorted(set(pids))


@pytest.mark.slow
def test_interrupted_harness_never_leaves_a_fault_behind(toxiproxy_server, proxy, tmp_path, request):
    name, _ = proxy
    client = toxiproxy_server.client()
    container = _docker_container(request)
    rng = random.Random(20240229)
    sigs = [signal.SIGINT, signal.SIGTERM, signal.SIGKILL, signal.SIGHUP]
    seen = []
    for rnd in range(ROUNDS):
        sig = sigs[rnd % len(sigs)]
        state = tmp_path / f"r{rnd}"
        port = free_port()
        args = [sys.executable, HARNESS, str(state), toxiproxy_server.api, name, str(port), str(rng.randrange(10**6))]
        h = subprocess.Popen(args + ([container.name] if container else []), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=_default_signals)
        try:
            assert h.stdout.readline().strip() == b"ready", h.stderr.read().decode()
            time.sleep(rng.uniform(0.05, 1.2))
            victims = _tiny_pids(port)
            h.send_signal(sig)
            rc = h.wait(20)
        finally:
            if h.poll() is None:
                h.kill()
                h.wait()
        err = h.stderr.read().decode()
        assert "Traceback" not in err or "KeyboardInterrupt" in err, err
        expected = {signal.SIGINT: (-2, 130), signal.SIGTERM: (143,), signal.SIGKILL: (-9,), signal.SIGHUP: (129,)}[sig]
        assert rc in expected, (sig, rc, err[-2000:])
        ledger = Ledger(state)
        if sig != signal.SIGKILL:
            assert ledger.outstanding() == [], "the signal handler must revert before exit"
        undone = cleanup(state)
        seen.append((sig.name, len(undone)))
        assert cleanup(state) == []  # idempotent
        assert ledger.outstanding() == []
        assert client.toxics(name) == [], (sig, rnd)
        assert client.proxy(name)["enabled"] is True
        assert all(_proc.state(p) in (None, "Z") for p in victims + _tiny_pids(port)), "no stopped or orphan process"
        if container is not None:
            container.reload()
            assert container.status == "running", (sig, rnd)
    assert any(n > 0 for s, n in seen if s == "SIGKILL"), f"SIGKILL rounds never left work for cleanup: {seen}"


SUITE = str(Path(__file__).with_name("proof_suite.py"))
PROOF_IMAGE = "llm-chaos-base:bookworm"


def _docker_for_runs():
    """A Docker client where the engine and the base image are (the runs then start a container), else None."""
    try:
        from tests._support import require

        require(f"image:{PROOF_IMAGE}")
    except pytest.skip.Exception:
        return None
    import docker

    return docker.from_env()


PYTEST_ROUNDS = int(os.environ.get("CHAOS_PROOF_PYTEST_ROUNDS", "20"))


def _fault_proxy(d: Path, upstream_port: int):
    """A chaos-faultproxy in front of 127.0.0.1:upstream_port, its token in a file."""
    from chaos.faults.tokens import token_file
    from chaos.pytest_plugin import require_component
    from chaos.stack.faultproxy import FaultProxyServer, find_binary
    from tests.standins.faultproxy.conftest import faultproxy_missing

    require_component("faultproxy", faultproxy_missing())
    server = FaultProxyServer("proof", f"127.0.0.1:{free_port()}", f"http://127.0.0.1:{upstream_port}",
                              token_file(d / "proxy.token"), log_path=d / "proxy.log", binary=find_binary())
    server.start()
    return server


@pytest.mark.slow
def test_a_signalled_pytest_run_reverts_every_fault_and_stops_what_it_started(toxiproxy_server, proxy, tmp_path,
                                                                              request):
    """SIGTERM (a cancelled CI job) and SIGHUP (a closed terminal) during a pytest run end it as
    Ctrl-C does: faults reverted by the ledger's handler, the session's fixtures torn down (the
    process it started is gone), exit code 2 (interrupted) and the reason printed; nothing for
    `chaos cleanup` to do. Where Docker and the base image are, each run also starts a labelled
    container and injects pause, restart and kill into it: none may be left paused, stopped or at all."""
    name, _ = proxy
    client = toxiproxy_server.client()
    docker_client = _docker_for_runs()
    rng = random.Random(20261201)
    sigs = [signal.SIGTERM, signal.SIGHUP, signal.SIGINT]
    for rnd in range(PYTEST_ROUNDS):
        sig = sigs[rnd % len(sigs)]
        state, port = tmp_path / f"p{rnd}", free_port()
        http = _fault_proxy(tmp_path / f"h{rnd}", port)  # in front of the run's target, outliving the run
        request.addfinalizer(http.stop)  # stopped at the round's end too; stop() is idempotent
        run_id = f"proof-{os.getpid()}-{rnd}"
        boxed = {} if docker_client is None else {"CHAOS_PROOF_IMAGE": PROOF_IMAGE, "CHAOS_PROOF_RUN_ID": run_id,
                                                  "CHAOS_PROOF_CONTAINER_PORT": str(free_port())}
        env = {**os.environ, **boxed, "CHAOS_PROOF_STATE": str(state), "CHAOS_PROOF_API": toxiproxy_server.api,
               "CHAOS_PROOF_PROXY": name, "CHAOS_PROOF_PORT": str(port), "CHAOS_PROOF_SEED": str(rng.randrange(10**6)),
               "CHAOS_PROOF_HTTP_PROXY": f"http://{http.listen}", "CHAOS_PROOF_HTTP_TOKEN": str(http.token.file)}
        # from the repository root, as a suite runs: its conftest and fixtures load
        run = subprocess.Popen([sys.executable, "-m", "pytest", SUITE, "-s", "-q"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, env=env, cwd=REPO, preexec_fn=_default_signals)
        out: list[bytes] = []
        try:
            for line in run.stdout:
                out.append(line)
                if line.strip().endswith(b"ready"):
                    break
            assert out and out[-1].strip().endswith(b"ready"), b"".join(out).decode()[-2000:]
            time.sleep(rng.uniform(0.05, 1.2))
            victims = _tiny_pids(port)
            settle = time.monotonic() + 15  # a restart or kill in progress: the target is between processes
            while not victims and run.poll() is None and time.monotonic() < settle:
                time.sleep(0.05)
                victims = _tiny_pids(port)
            if not victims:  # the run ended by itself: show why
                run.kill()
                rest, _ = run.communicate(timeout=30)
                raise AssertionError(f"round {rnd}: the run's target is gone before the signal: "
                                     + (b"".join(out) + rest).decode(errors="replace")[-3000:])
            run.send_signal(sig)
            try:
                rest, _ = run.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                run.kill()
                rest, _ = run.communicate()
                raise AssertionError(f"round {rnd}: {sig.name} did not end the run within 30 s: "
                                     + (b"".join(out) + (rest or b"")).decode(errors="replace")[-4000:]) from None
        finally:
            if run.poll() is None:  # the run hung: SIGKILL it, and the target it started with it
                run.kill()
                run.wait()
                for pid in _tiny_pids(port):
                    try:
                        os.killpg(os.getpgid(pid), signal.SIGKILL)
                    except OSError:
                        pass
        text = (b"".join(out) + (rest or b"")).decode(errors="replace")
        assert run.returncode == 2, (sig.name, run.returncode, text[-3000:])
        if sig != signal.SIGINT:
            assert f"{sig.name} received" in text, text[-2000:]
        assert Ledger(state).outstanding() == [], (sig.name, rnd, "the run must revert before it exits")
        assert cleanup(state) == [], "nothing left for chaos cleanup"
        assert client.toxics(name) == [], (sig.name, rnd)
        assert client.proxy(name)["enabled"] is True
        assert all(_proc.state(p) in (None, "Z") for p in victims + _tiny_pids(port)), \
            (sig.name, rnd, "the process the run started is stopped by its teardown, never left stopped")
        try:
            assert FaultProxyAdmin.of(http).rules() == [], (sig.name, rnd, "an HTTP fault rule was left on the fault proxy")
        finally:
            http.stop()
        if docker_client is not None:
            left = docker_client.containers.list(all=True, filters={"label": f"llm-chaos.run-id={run_id}"})
            for c in left:
                c.remove(force=True)
            assert not left, (sig.name, rnd, "the run's labelled container outlived it",
                              [(c.name, c.status) for c in left])
