"""A pytest suite for the signal proof of a pytest run (run by test_proof.py, not collected itself):
its session fixture starts a supervised process, its one test injects every kind of fault in a
loop until the run is signalled. Parameters come from the environment (CHAOS_PROOF_*)."""
from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

import pytest

from chaos.faults import down, kill, latency, pause, rank_freeze, rank_link_cut, reset_peer, restart
from chaos.faults.base import Policy
from chaos.faults.http import http_error
from chaos.faults.ledger import Ledger
from chaos.faults.proxy_admin import FaultProxyAdmin
from chaos.faults.tokens import TokenRef
from chaos.targets.docker import DockerTarget
from chaos.targets.process import ProcessTarget

TINY = str(Path(__file__).resolve().parents[2] / "integration" / "targets" / "tinyserver.py")
STATE, API, PROXY = (os.environ[f"CHAOS_PROOF_{k}"] for k in ("STATE", "API", "PROXY"))
# the fault proxy in front of the target: started by the proof test, so it outlives this run and the
# test can see that no rule of it was left behind
HTTP_PROXY, HTTP_TOKEN = os.environ["CHAOS_PROOF_HTTP_PROXY"], os.environ["CHAOS_PROOF_HTTP_TOKEN"]
PORT, SEED = int(os.environ["CHAOS_PROOF_PORT"]), int(os.environ["CHAOS_PROOF_SEED"])
# where Docker and the base image are: a labelled container the run starts, and faults on it
IMAGE, RUN_ID = os.environ.get("CHAOS_PROOF_IMAGE"), os.environ.get("CHAOS_PROOF_RUN_ID", "proof")
CPORT = int(os.environ.get("CHAOS_PROOF_CONTAINER_PORT", "0"))


@pytest.fixture(scope="session")
def target():
    """What the run started: only its teardown stops it."""
    t = ProcessTarget("proof", [sys.executable, TINY, str(PORT), "--ranks", "2"], port=PORT, state_dir=STATE)
    t.start()
    try:
        t.wait_healthy(10)
        # both ranks up before the first rank freeze (as tests/integration/targets/test_process.py waits)
        deadline = time.monotonic() + 10
        while len(t.rank_pids()) < 2:
            assert time.monotonic() < deadline, "the target's two ranks did not start"
            time.sleep(0.05)
        yield t
    finally:
        t.stop(3)


@pytest.fixture(scope="session")
def container():
    """A labelled container the run started (the tiny server inside): only its teardown removes it."""
    if not IMAGE:
        yield None
        return
    t = DockerTarget("proofc", IMAGE, args=["python3", "/srv/tinyserver.py", str(CPORT)], port=CPORT, run_id=RUN_ID,
                     state_dir=STATE, volumes={TINY: {"bind": "/srv/tinyserver.py", "mode": "ro"}})
    t.start()
    try:
        t.wait_healthy(20)
        yield t
    finally:
        t.remove()


def test_faults_until_signalled(target, container):
    rng = random.Random(SEED)
    policy = Policy(ledger=Ledger(STATE), verify_timeout_s=3.0, allow_destructive=True, recover_timeout_s=10.0)
    admin = FaultProxyAdmin(HTTP_PROXY, TokenRef(file=HTTP_TOKEN), name="proof")
    # the rank-link cut is a toxic on the proxy, as a cut of a TCP rank link is
    network = [lambda: latency(API, PROXY, latency=30), lambda: reset_peer(API, PROXY), lambda: down(API, PROXY),
               lambda: rank_link_cut(API, PROXY), lambda: http_error(admin, 503, expect_hits=False)]
    kinds = [lambda: rank_freeze(target, rank=1), lambda: pause(target), lambda: restart(target),
             lambda: kill(target)]
    if container is not None:  # pause, restart and a kill of PID 1 that the restart policy answers
        kinds += [lambda: pause(container), lambda: restart(container), lambda: kill(container)]
    print("ready", flush=True)
    deadline = time.monotonic() + 60  # bounded: the proof signals within about a second
    while time.monotonic() < deadline:
        choice = rng.randrange(3)  # one fault per aim at a time, as in proof_harness.py
        net, tgt = rng.choice(network)(), rng.choice(kinds)()
        fault = net if choice == 0 else tgt if choice == 1 else net & tgt
        with fault.using(policy):
            time.sleep(rng.uniform(0.0, 0.3))
