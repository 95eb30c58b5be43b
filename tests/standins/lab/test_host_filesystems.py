"""Each lab host has its own root filesystem: what a process on it writes, wherever it writes, never
appears in the harness's filesystem or on another host; the only way out is the network."""
from __future__ import annotations

import os
import shutil
import subprocess
import uuid

from tests.integration.cli.test_cli import REPO


def _on(host, script: str) -> subprocess.CompletedProcess[bytes]:
    from chaos.stack import lab_hostfs

    return lab_hostfs.run(host, ["sh", "-c", script])


def test_what_a_host_writes_stays_on_it(lab) -> None:
    from chaos.stack.lab import EDGE, GPU

    mark = uuid.uuid4().hex[:8]
    shared = REPO / ".state" / f"isolation-{mark}"  # a path this machine's disk has: the host reads it through
    shared.mkdir(parents=True)
    try:
        (shared / "from-harness").write_text("harness\n")
        paths = [f"/tmp/{mark}", f"/run/{mark}", f"/var/log/chaos-lab/{mark}", f"{shared}/from-gpu", f"/{mark}"]
        r = _on(GPU, f"cat {shared}/from-harness && " + " && ".join(f"echo gpu > {p}" for p in paths))
        assert r.returncode == 0 and r.stdout == b"harness\n", r.stderr
        for p in paths:
            assert not os.path.exists(p), f"{p} written on the GPU host is on the harness's disk"
            assert _on(GPU, f"cat {p}").stdout == b"gpu\n", f"{p} is not on the GPU host"
            assert _on(EDGE, f"test -e {p}").returncode == 1, f"{p} written on the GPU host is on the edge host"
        assert sorted(os.listdir(shared)) == ["from-harness"]
    finally:
        shutil.rmtree(shared)


def test_a_session_over_ssh_and_the_labs_services_live_in_the_hosts_filesystem(lab) -> None:
    """sshd, the Docker engine and what an SSH login starts run in the host's mount namespace, not the
    harness's, with the host's own /run (sshd's pid file) and engine data root."""
    from chaos.stack.lab import GPU, LOAD

    mark = uuid.uuid4().hex[:8]
    r = subprocess.run(["ssh", "-F", str(lab.ssh_config), "-o", "BatchMode=yes", LOAD.address,
                        f"echo load > /tmp/{mark} && cat /run/sshd-lab.pid"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.strip().isdigit(), r.stderr
    assert not os.path.exists(f"/tmp/{mark}") and not os.path.exists("/run/sshd-lab.pid")
    assert _on(LOAD, f"cat /tmp/{mark}").stdout == b"load\n"
    here = os.stat("/proc/self/ns/mnt").st_ino
    for name in ("sshd", "sshd-load", "dockerd"):
        pid = lab._pid(name)
        assert pid is not None and os.stat(f"/proc/{pid}/ns/mnt").st_ino != here, name
    # the engine's data root is the GPU host's own, in memory (a lab of the code before left it on this disk)
    assert _on(GPU, f"echo gpu > /var/lib/chaos-lab/{mark}").returncode == 0
    assert not os.path.exists(f"/var/lib/chaos-lab/{mark}")
    fs = _on(GPU, "stat -f -c %T /var/lib/chaos-lab /")
    assert fs.stdout.split() == [b"tmpfs", b"overlayfs"], fs.stdout
