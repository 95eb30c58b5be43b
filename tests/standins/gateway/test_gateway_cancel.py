"""The reference gateway lets go of an upstream stream when its client hangs up, so the replica aborts it;
with the planted defect upstream-held-after-disconnect it reads on for nobody (the negative control)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

from chaos.load.hangup import HANGUP, HangUp, start_streams
from chaos.observe.metrics import parse_metrics, value
from chaos.stack.gateway.defects import ENV_VAR, UPSTREAM_HELD_AFTER_DISCONNECT
from tests._support import free_port
from tests.standins.sim.conftest import Sim, wait_for


@pytest.fixture
def sim() -> Iterator[Sim]:
    s = Sim("--served-model-name", "sim-model", "--max-model-len", "4096", "--fault", "slow:20")
    try:
        yield s
    finally:
        s.stop()


def _gateway(sim: Sim, defect: str | None) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, ENV_VAR: defect or ""}
    proc = subprocess.Popen([sys.executable, "-m", "chaos.stack.gateway", "--listen", f"127.0.0.1:{port}",
                             "--stable", f"a={sim.base}"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return urllib.request.urlopen(url + "/gateway/health", timeout=1).status == 200
        except OSError:
            return False

    assert wait_for(up, 20.0), "gateway did not start"
    return proc, url


def _running(sim: Sim) -> float:
    return value(parse_metrics(sim.request("GET", "/metrics")[1].decode()), "vllm:num_requests_running") or 0.0


@pytest.mark.parametrize("defect", [None, UPSTREAM_HELD_AFTER_DISCONNECT])
def test_hang_up_through_the_gateway(sim: Sim, defect: str | None) -> None:
    proc, url = _gateway(sim, defect)
    try:
        step = HangUp(clients=2, after_tokens=5, max_tokens=300, deadline_s=20.0)  # 300 tokens: 6 s of decode
        hung, join = start_streams(url, step, HANGUP, model="sim-model")
        join(False)
        assert all(c.hung_up for c in hung), hung
        t = time.monotonic()
        freed = wait_for(lambda: _running(sim) == 0, 1.5)
        if defect is None:
            assert freed, f"the replica still runs {_running(sim)} requests {time.monotonic() - t:.1f} s after the hang-up"
        else:
            assert not freed and _running(sim) == 2, "the planted defect did not hold the upstream open"
    finally:
        proc.terminate()
        proc.wait(10)
