"""The lab of real hosts: a GPU-host network namespace with its own sshd and Docker engine, reached
only over SSH, and the one-line errors a broken key or an unreachable engine give."""
from __future__ import annotations

import os
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import pytest

from chaos.errors import TargetError
from tests._support import free_port
from tests.integration.cli.test_cli import chaos
from tests.standins.lab.conftest import IMAGE


def _get(url: str) -> int | str:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status
    except (urllib.error.URLError, OSError) as e:
        return type(e).__name__


def test_a_container_on_the_gpu_host_serves_on_its_address_only(lab_ssh) -> None:
    from chaos.stack.lab import GPU
    from chaos.targets.docker_client import client_for

    client = client_for(lab_ssh.docker_host())  # through `ssh -L`, the engine inside the namespace
    port = free_port()
    c = client.containers.run(IMAGE, ["python3", "-m", "http.server", str(port), "--bind", GPU.address],
                              network_mode="host", detach=True, name=f"lab-{uuid.uuid4().hex[:6]}")
    try:
        deadline = time.monotonic() + 30
        while _get(f"http://{GPU.address}:{port}/") != 200:
            assert time.monotonic() < deadline, c.logs().decode()[-500:]
            time.sleep(0.2)
        assert _get(f"http://127.0.0.1:{port}/") != 200  # not on the harness machine's loopback
        # the machine's own engine does not know the container: it is on another host's engine
        local = subprocess.run(["docker", "ps", "-q", "--filter", f"name={c.name}"], capture_output=True, text=True)
        assert local.stdout.strip() == ""
    finally:
        c.remove(force=True)


def test_a_broken_key_is_one_line_naming_the_host(lab, tmp_path, monkeypatch) -> None:
    from chaos.stack.lab import GPU
    from chaos.targets import ssh_docker
    from chaos.targets.docker_client import client_for

    wrong = tmp_path / "wrong_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(wrong)], check=True)
    cfg = tmp_path / "ssh_config"
    cfg.write_text(lab.ssh_config.read_text().replace(str(lab.key), str(wrong)))
    monkeypatch.setenv("CHAOS_SSH_CONFIG", str(cfg))
    try:
        t0 = time.monotonic()
        with pytest.raises(TargetError) as e:
            client_for(lab.docker_host())
        assert time.monotonic() - t0 < 20  # BatchMode: never waits for a password prompt
        msg = str(e.value)
        assert "\n" not in msg and GPU.address in msg and "Permission denied" in msg, msg
        env_file = tmp_path / "lab-broken.yaml"
        env_file.write_text(f"name: lab-broken\nendpoints: {{api: 'http://{GPU.address}:9'}}\n"
                            f"targets:\n  - {{name: gpu-1, kind: docker, host: {GPU.address}, port: 9, "
                            f"image: {IMAGE}, docker_host: '{lab.docker_host()}'}}\n")
        r = chaos("env", "check", "--env", str(env_file), "--probe", "--timeout", "2",
                  env={"CHAOS_SSH_CONFIG": str(cfg)})
        assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
        engine = [line for line in r.stdout.splitlines() if "docker engine" in line]
        assert len(engine) == 1 and engine[0].startswith("FAIL") and "Permission denied" in engine[0], r.stdout
    finally:
        ssh_docker.close_all()


def test_an_unreachable_engine_socket_is_one_line(lab_ssh) -> None:
    from chaos.stack.lab import GPU
    from chaos.targets.docker_client import client_for

    with pytest.raises(TargetError) as e:
        client_for(f"ssh://root@{GPU.address}/run/no-such-engine.sock")
    assert "\n" not in str(e.value) and GPU.address in str(e.value)


def test_a_remote_kill_is_a_crash_the_restart_policy_answers_and_docker_kill_is_not(lab_ssh, tmp_path) -> None:
    """Over SSH there is no os.kill: the target's kill signals the container's init from the GPU
    host's PID namespace, so `restart: always` brings it back; `docker kill` is a manual stop."""
    from chaos.stack.lab import GPU
    from chaos.targets.docker import DockerTarget

    port = free_port()
    serve = f"mkdir -p /srv && cd /srv && echo ok > health && exec python3 -m http.server {port} --bind {GPU.address}"
    t = DockerTarget("lab-replica", IMAGE, args=["sh", "-c", serve],
                     port=port, host=GPU.address, docker_host=lab_ssh.docker_host(), run_id=uuid.uuid4().hex[:6],
                     state_dir=tmp_path, restart_policy="always")
    assert t.remote
    try:
        t.start()
        t.wait_healthy(30)
        pid, before = t.pid(), t.restart_count()
        t.kill()
        deadline = time.monotonic() + 30
        while not (t.restart_count() > before and t.pid() not in (None, pid) and t.health()):
            assert time.monotonic() < deadline, f"not restarted: {t.container.status}, {t.restart_count()}"
            time.sleep(0.2)
        t.container.kill()  # what `docker kill` does: Docker treats it as a stop, the policy stays quiet
        time.sleep(3)
        assert t.container.status == "exited"
    finally:
        t.remove()


def test_the_hosts_reach_each_other_through_the_router_only_inside_the_lab(lab) -> None:
    from chaos.stack.lab import EDGE, FORWARD_RULE, GPU, LOAD

    port = free_port()
    server = subprocess.Popen(["ip", "netns", "exec", GPU.netns, "python3", "-m", "http.server", str(port),
                               "--bind", GPU.address], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for h in (LOAD, EDGE):  # another host's address, through the root namespace's routing
            probe = f"import urllib.request as u; print(u.urlopen('http://{GPU.address}:{port}/', timeout=2).status)"
            deadline = time.monotonic() + 10
            while True:
                r = subprocess.run(["ip", "netns", "exec", h.netns, "python3", "-c", probe], capture_output=True, text=True)
                if r.stdout.strip() == "200" or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert r.stdout.strip() == "200", (h.name, r.stderr[-300:])
        routes = subprocess.run(["ip", "-n", LOAD.netns, "route"], capture_output=True, text=True).stdout
        assert "default" not in routes  # a host has no way out of the lab
        assert subprocess.run(["iptables", "-C", *FORWARD_RULE], capture_output=True).returncode == 0
    finally:
        server.kill()
        server.wait()


def test_down_leaves_nothing_and_up_comes_back(lab) -> None:
    from chaos.stack import lab_hostfs
    from chaos.stack.lab import FORWARD_RULE, HOSTS

    engine = lab._pid("dockerd")
    assert lab.down()
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(h.netns in names for h in HOSTS)
    assert not list(lab.state.glob("*.lab-pid"))
    assert engine is not None and not os.path.exists(f"/proc/{engine}"), "the GPU host's engine is gone"
    assert not any(f"-f {lab.state}" in p or "/etc/chaos-lab/sshd_config" in p for p in _cmdlines()), \
        "no sshd of the lab left"
    assert subprocess.run(["iptables", "-C", *FORWARD_RULE], capture_output=True).returncode != 0
    points = [line.split()[4] for line in open("/proc/self/mountinfo")]
    left = [p for p in points if p.startswith((str(lab_hostfs.NS_DIR), "/run/netns/chaos-lab-", "/var/run/netns/"))]
    assert not left, f"namespace files or host filesystems left: {left}"
    assert not lab_hostfs.NS_DIR.exists()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert not any(h.veth in links for h in HOSTS)
    assert lab.down() == []  # idempotent
    assert lab.key.exists()  # the key stays for the next up
    lab.up()  # and the same state comes back up, as fresh hosts (the session's other lab tests go on with it)
    assert lab.gpu_docker("image", "inspect", IMAGE).returncode != 0, "a fresh GPU host has no images"
    lab.load_image(IMAGE)


def _cmdlines() -> list[str]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                out.append(open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                pass
    return out
