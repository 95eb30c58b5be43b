"""Records against the simulator's ground truth (`--request-log`), instant profile."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
import urllib.request

import pytest

from chaos.load.runner import run_load
from tests._support import free_port


@pytest.fixture
def sim(tmp_path):
    if importlib.util.find_spec("chaos.stack.sim.__main__") is None:
        pytest.skip("simulator not runnable yet (chaos.stack.sim has no __main__)")
    port = free_port()
    log = tmp_path / "sim-requests.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "chaos.stack.sim", "--port", str(port), "--profile", "instant",
                             "--request-log", str(log)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 20
        while time.monotonic() < end:
            try:
                with urllib.request.urlopen(url + "/health", timeout=1):
                    break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"simulator exited: {proc.stderr.read().decode()[-500:]}")
                time.sleep(0.1)
        yield url, log, proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_records_agree_with_simulator_log(sim, tmp_path, api):
    url, log, proc = sim
    res = run_load(url, out_dir=tmp_path / "rec", users=4, duration_s=1.5, api=api, max_tokens=8,
                   classes={"short": 64, "long": 256, "xl": 1024}, seed=2)
    proc.terminate()
    proc.wait(10)
    truth = {}
    for line in log.read_text().splitlines():
        e = json.loads(line)
        truth[e["request_id"]] = e
    assert len(res.records) > 10
    for r in res.records:
        assert r.ok, r
        t = truth[r.request_id]
        assert t["status"] == r.status == 200
        assert r.output_tokens == t["output_tokens"] == 8
        assert r.prompt_tokens == t["prompt_tokens"]
        assert r.model_answered == "sim-model"
        # client clock after the server's: the client sees the first token after it was written
        assert r.t_send <= t["t_arrival"] + 0.002
        err = (r.t_send + r.ttft) - t["t_first_token"]
        # kernel receive stamps: only merged unread segments (a few instant-profile steps) add error
        assert -0.002 < err < 0.05, (err, r, t)
        # the simulator stamps t_finish as it closes the stream, which may be after our [DONE]
        assert abs((r.t_send + r.e2e) - t["t_finish"]) < 0.5 and r.e2e >= r.ttft
