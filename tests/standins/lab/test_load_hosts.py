"""Locust across hosts: the master here, the workers on the lab's load host; one worker killed
mid-run is reported and the run carries on, its records merged with the others'."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from chaos.errors import LoadError
from tests._support import free_port


@pytest.fixture
def api_on_the_lab(lab, tmp_path):
    """A simulator on the root side of the load host's link: what the workers send to."""
    from chaos.stack.lab import LOAD

    port, log = free_port(), tmp_path / "sim.requests.jsonl"
    sim = subprocess.Popen([sys.executable, "-m", "chaos.stack.sim", "--host", LOAD.gateway, "--port", str(port),
                            "--profile", "instant", "--served-model-name", "sim-model", "--request-log", str(log)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://{LOAD.gateway}:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1):
                break
        except OSError:
            assert time.monotonic() < deadline and sim.poll() is None, "simulator did not start"
            time.sleep(0.2)
    yield url, log
    sim.kill()
    sim.wait()


def _netns_inode(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def test_workers_on_the_load_host_merge_into_one_run_and_a_killed_worker_is_reported(api_on_the_lab, tmp_path):
    from chaos.load.runner import start_load
    from chaos.stack.lab import LOAD

    url, sim_log = api_on_the_lab
    handle = start_load(url, out_dir=tmp_path / "load", workers=2, worker_host="lab-load", rate=16, duration_s=14,
                        model="sim-model", max_tokens=4, mix={"short": 1}, classes={"short": 16}, seed=3)
    workers = handle.worker_pids()
    assert len(workers) == 2
    try:
        deadline = time.monotonic() + 30  # both workers sending (each has its own record file)
        while len([f for f in (tmp_path / "load").glob("records-*.jsonl") if f.stat().st_size]) < 2:
            assert time.monotonic() < deadline, "the two workers never both sent"
            time.sleep(0.2)
        lab_ns = os.stat(f"/var/run/netns/{LOAD.netns}").st_ino
        assert all(_netns_inode(p) == lab_ns for p in workers.values()), "the workers run on the load host"
        assert _netns_inode(handle.procs[0].pid) == _netns_inode(os.getpid()), "the master runs here"
        time.sleep(2)
        t_kill = time.time()
        os.kill(workers["worker-1"], signal.SIGKILL)
    finally:
        result = handle.wait()
    assert len(result.lost_workers) == 1 and result.lost_workers[0].startswith("worker-1 (killed by SIGKILL"), \
        result.lost_workers
    files = sorted((tmp_path / "load").glob("records-*.jsonl"))
    assert len(files) == 2
    by_file = {f.name: [json.loads(line) for line in f.read_text().splitlines() if line.strip()] for f in files}
    killed = next(n for n in by_file if n.endswith(f"-{workers['worker-1']}.jsonl"))
    survivor = next(n for n in by_file if n != killed)
    assert by_file[killed] and max(r["t_send"] for r in by_file[killed]) < t_kill + 0.5
    late = [r for r in by_file[survivor] if r["t_send"] > t_kill + 4]
    assert late, "the surviving worker carried on after the kill"
    # merged as one run: every record of both files, in send order
    assert len(result.records) == sum(len(v) for v in by_file.values())
    assert [r.t_send for r in result.records] == sorted(r.t_send for r in result.records)
    # and the server saw them come from the load host's address, nothing from anywhere else
    clients = {json.loads(line)["client"] for line in sim_log.read_text().splitlines() if line.strip()}
    assert clients == {LOAD.address}, clients


def test_an_unknown_worker_host_is_one_line(tmp_path):
    with pytest.raises(LoadError) as e:
        from chaos.load.runner import start_load

        start_load("http://127.0.0.1:9", out_dir=tmp_path, workers=1, worker_host="gpu-7", duration_s=1)
    assert "worker host 'gpu-7'" in str(e.value) and "lab-load" in str(e.value) and "\n" not in str(e.value)


def _in_load_host(marker: str) -> list[int]:
    """Pids of the processes on the load host whose command line holds `marker`."""
    from chaos.shared import proc as _proc
    from chaos.stack.lab import LOAD

    ns = os.stat(f"/var/run/netns/{LOAD.netns}").st_ino
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}/ns/net").st_ino == ns and marker in _proc.cmdline(int(name)):
                    out.append(int(name))
            except OSError:
                pass  # gone meanwhile
    return out


def test_workers_over_ssh_send_their_records_back_and_a_killed_one_is_reported(api_on_the_lab, lab_ssh, tmp_path):
    """The staging way: workers started over SSH on the load host (ssh://root@10.231.2.2), the job sent
    over the session, the records back over it into this run's directory, the master reached through
    the session's reverse forward (it binds 127.0.0.1 only)."""
    from chaos.load.runner import start_load
    from chaos.stack.lab import LOAD

    url, sim_log = api_on_the_lab
    out = tmp_path / "load"
    handle = start_load(url, out_dir=out, workers=2, worker_host=f"ssh://root@{LOAD.address}", rate=16,
                        duration_s=14, model="sim-model", max_tokens=4, mix={"short": 1}, classes={"short": 16}, seed=3)
    try:
        assert handle.placement.master_host == "127.0.0.1"
        deadline = time.monotonic() + 30  # both workers' records arriving here
        while len([f for f in out.glob("records-*.jsonl") if f.stat().st_size]) < 2:
            assert time.monotonic() < deadline, "the two ssh workers' records never both arrived"
            time.sleep(0.2)
        remote = _in_load_host("-m locust")
        assert len(remote) == 2, "two locust workers run on the load host"
        assert all(_netns_inode(p) == _netns_inode(os.getpid()) for p in handle.worker_pids().values()), \
            "here only the ssh clients run"
        time.sleep(2)
        t_kill = time.time()
        os.kill(remote[1], signal.SIGKILL)
    finally:
        result = handle.wait()
    assert len(result.lost_workers) == 1 and "killed by SIGKILL on ssh://" in result.lost_workers[0], \
        result.lost_workers
    by_file = {f.name: [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
               for f in sorted(out.glob("records-*.jsonl"))}
    assert len(by_file) == 2
    killed = next(n for n in by_file if n.endswith(f"-{remote[1]}.jsonl"))
    survivor = next(n for n in by_file if n != killed)
    assert by_file[killed] and max(r["t_send"] for r in by_file[killed]) < t_kill + 0.5
    assert [r for r in by_file[survivor] if r["t_send"] > t_kill + 4], "the surviving worker carried on"
    assert len(result.records) == sum(len(v) for v in by_file.values())
    assert list(out.glob("meta-*.json")), "the survivor's meta came back at the end"
    # every record the server answered was sent from the load host and came back here
    served = [json.loads(line) for line in sim_log.read_text().splitlines() if line.strip()]
    assert {r["client"] for r in served} == {LOAD.address}
    assert not _in_load_host("chaos.load.ssh_worker") and not _in_load_host("-m locust"), "nothing left there"


def test_an_ssh_worker_host_that_refuses_the_key_is_one_line(lab, tmp_path, monkeypatch):
    from chaos.load.runner import start_load
    from chaos.stack.lab import LOAD

    key = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    config = tmp_path / "ssh_config"
    config.write_text(lab.ssh_config.read_text().replace(str(lab.key), str(key)))
    monkeypatch.setenv("CHAOS_SSH_CONFIG", str(config))
    t0 = time.monotonic()
    with pytest.raises(LoadError) as e:
        start_load("http://127.0.0.1:9", out_dir=tmp_path / "load", workers=1, worker_host=f"ssh://root@{LOAD.address}",
                   rate=1, duration_s=5)
    msg = str(e.value)
    assert f"worker host ssh://root@{LOAD.address}: worker-0 did not start" in msg and "Permission denied" in msg, msg
    assert "\n" not in msg and time.monotonic() - t0 < 30


def test_env_check_logs_in_to_the_load_host_and_names_what_is_missing(lab, tmp_path, monkeypatch):
    from chaos.load.placement import check_worker_host
    from chaos.stack.lab import LOAD

    host = f"ssh://root@{LOAD.address}"
    monkeypatch.setenv("CHAOS_SSH_CONFIG", str(lab.ssh_config))
    ok, detail = check_worker_host(host)
    assert ok and detail.startswith("ssh ok, locust 2."), detail
    ok, detail = check_worker_host(host, python="/opt/nowhere/bin/python")
    assert not ok and "/opt/nowhere/bin/python" in detail and "\n" not in detail, detail
    key = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    config = tmp_path / "ssh_config"
    config.write_text(lab.ssh_config.read_text().replace(str(lab.key), str(key)))
    monkeypatch.setenv("CHAOS_SSH_CONFIG", str(config))
    ok, detail = check_worker_host(host)
    assert not ok and "Permission denied" in detail, detail
