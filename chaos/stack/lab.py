"""A lab of real hosts on this machine: network namespaces with their own addresses.

    root namespace (the harness)  10.231.1.1 --veth-- 10.231.1.2  chaos-lab-gpu: sshd + its own dockerd
                                  10.231.2.1 --veth-- 10.231.2.2  chaos-lab-load: sshd, Locust workers
                                  10.231.3.1 --veth-- 10.231.3.2  chaos-lab-edge: Toxiproxy, the gateway

The root namespace routes between the hosts (10.231.0.0/16 only): a host reaches another the way
machines on one network do, through a router, never through 127.0.0.1.

The "GPU host" is reached the way a team reaches theirs: Docker over SSH (`docker_host:
ssh://root@10.231.1.2/run/chaos-lab/gpu/docker.sock`), with a key made when the lab comes up. It
runs its own Docker engine inside its namespace (own data root, exec root and containerd), so a
container with host networking serves on the GPU host's address, not on the harness's machine.
Every address is inside the 10.231.0.0/16 the lab creates; nothing else is ever aimed at.

Each host also has its own root filesystem (chaos/stack/lab_hostfs.py): what it writes (request logs, its
services' logs and pid files, the engine's data) stays on it, so the harness learns of it only over
the network, as it would from staging. It reads this machine's files through, at the same paths, save
under its own /tmp, /dev/shm, /run and engine data roots: a checkout, .tools or venv under /tmp or /dev/shm
is shown to every host read-through (`harness_paths`), one under the others is refused before a host is
made. The lab's own provisioning (the hosts' sshd configs and keys, the images, the fault proxies' tokens)
is put onto the hosts as a deploy tool would.

`chaos lab up` / `chaos lab down` (idempotent); the harness's side of the state (the lab's client
key, ssh_config, the pids it started) lives in `.state/lab/`.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from chaos.errors import StackError
from chaos.shared import proc as _proc
from chaos.stack import lab_hostfs as hostfs

PREFIX = "10.231"


@dataclass(frozen=True)
class Host:
    name: str   # the namespace is chaos-lab-<name>
    subnet: int

    @property
    def netns(self) -> str:
        return f"chaos-lab-{self.name}"

    @property
    def address(self) -> str:  # inside the namespace
        return f"{PREFIX}.{self.subnet}.2"

    @property
    def gateway(self) -> str:  # the root side of its veth
        return f"{PREFIX}.{self.subnet}.1"

    @property
    def veth(self) -> str:
        return f"clab-{self.name}"[:15]


GPU, LOAD, EDGE = Host("gpu", 1), Host("load", 2), Host("edge", 3)
HOSTS = (GPU, LOAD, EDGE)
SSH_HOSTS = (GPU, LOAD)  # reached over SSH: Docker on the GPU host, Locust workers on the load host
NETWORK = f"{PREFIX}.0.0/16"
# Docker sets the FORWARD policy to DROP; this one rule (removed by `down`) lets the hosts talk
FORWARD_RULE = ["FORWARD", "-s", NETWORK, "-d", NETWORK, "-m", "comment", "--comment", "llm-chaos-lab", "-j", "ACCEPT"]
ENGINE_SOCKET = "/run/chaos-lab/gpu/docker.sock"  # on the GPU host
HOST_ETC = "/etc/chaos-lab"  # on each SSH host: its sshd's config, host key and authorized keys
HOST_DIRS = {"gpu": ("/run/sshd", "/run/chaos-lab/gpu"), "load": ("/run/sshd",)}  # made on each host's own /run


def _run(*cmd: str, check: bool = True, ns: str | None = None) -> subprocess.CompletedProcess[str]:
    full = (["ip", "netns", "exec", ns] if ns else []) + list(cmd)
    r = subprocess.run(full, capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise StackError(f"lab: `{' '.join(full)}` failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
    return r


def missing() -> str | None:
    """Why the lab cannot run here (None when it can): root, iproute2, sshd, ssh, dockerd."""
    if os.geteuid() != 0:
        return "the lab needs root (network namespaces)"
    for tool in ("ip", "nsenter", "ssh", "ssh-keygen", "dockerd", "docker"):
        if shutil.which(tool) is None:
            return f"the lab needs `{tool}` (apt-get install iproute2 openssh-client docker.io)"
    if not Path("/usr/sbin/sshd").exists():
        return "the lab needs sshd (apt-get install openssh-server)"
    return None


# programs a deployment runs on the hosts from this machine's disk, when the harness's environment names them
PROGRAM_VARS = ("CHAOS_TOXIPROXY_BIN", "CHAOS_FAULTPROXY_BIN")


def harness_paths() -> list[str]:
    """What the hosts run from this machine's disk, at the same paths: the working directory, this checkout
    and its .tools, the interpreter and its environment, and the programs $CHAOS_*_BIN name."""
    repo = Path(__file__).resolve().parents[2]
    paths = [os.getcwd(), str(repo), str(repo / ".tools"), sys.executable, sys.prefix]
    return paths + [v for var in PROGRAM_VARS if (v := os.environ.get(var))]


def shared_paths(paths: list[str]) -> tuple[str, ...]:
    """The directories of this machine to show the hosts so that they see `paths`; StackError, in one line,
    naming a path no host can be shown and why."""
    dirs, refused = hostfs.shares(paths)
    if refused:
        path, why = refused[0]
        raise StackError(f"lab: the hosts cannot see {path}: {why}; put the checkout, its .tools and the venv "
                         "elsewhere")
    return dirs


# a terminal's size, which a host's init never gives its services: dockerd passes its environment to the
# `ps` behind `docker top`, which then cuts every line at COLUMNS (80 under pytest-xdist: the workers
# inherit it from the controller's readline), and the rank titles with them
TERMINAL_VARS = ("COLUMNS", "LINES")


def host_environ() -> dict[str, str]:
    """The environment a lab host's services start with: the harness's, less its terminal's size."""
    return {k: v for k, v in os.environ.items() if k not in TERMINAL_VARS}


class Lab:
    def __init__(self, state_dir: str | os.PathLike[str] = ".state/lab") -> None:
        self.state = Path(state_dir).resolve()
        self.key = self.state / "id_ed25519"
        self.ssh_config = self.state / "ssh_config"

    # -- namespaces -------------------------------------------------------------------------------
    def _netns(self, h: Host) -> None:
        if h.netns not in _run("ip", "netns", "list").stdout.split():
            _run("ip", "netns", "add", h.netns)
        if _run("ip", "link", "show", h.veth, check=False).returncode != 0:
            _run("ip", "link", "add", h.veth, "type", "veth", "peer", "name", "eth0", "netns", h.netns)
            _run("ip", "addr", "add", f"{h.gateway}/24", "dev", h.veth)
            _run("ip", "addr", "add", f"{h.address}/24", "dev", "eth0", ns=h.netns)
        _run("ip", "link", "set", h.veth, "up")
        _run("ip", "link", "set", "eth0", "up", ns=h.netns)
        _run("ip", "link", "set", "lo", "up", ns=h.netns)
        if _run("ip", "route", "show", NETWORK, ns=h.netns).stdout.strip() == "":
            _run("ip", "route", "add", NETWORK, "via", h.gateway, ns=h.netns)

    def _routing(self) -> None:
        """Let the root namespace forward between the hosts' subnets (and nothing else)."""
        forward = Path("/proc/sys/net/ipv4/ip_forward")
        if forward.read_text().strip() != "1":  # Docker already sets it; remember to put it back otherwise
            (self.state / "ip_forward.orig").write_text(forward.read_text())
            forward.write_text("1\n")
        if shutil.which("iptables") and _run("iptables", "-C", *FORWARD_RULE, check=False).returncode != 0:
            _run("iptables", "-I", *FORWARD_RULE)

    # -- the GPU host: sshd and its Docker engine ------------------------------------------------
    def _keys(self) -> None:
        """The lab's client key and host key here (kept across ups, so known_hosts stays true); each SSH
        host gets its sshd's config, the host key and the authorized key on its own filesystem."""
        self.state.mkdir(parents=True, exist_ok=True)
        for path in (self.key, self.state / "host_ed25519"):
            if not path.exists():
                _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "llm-chaos-lab", "-f", str(path))
        host_pub = Path(f"{self.state / 'host_ed25519'}.pub").read_text().split()
        (self.state / "known_hosts").write_text("".join(f"{h.address} {host_pub[0]} {host_pub[1]}\n" for h in SSH_HOSTS))
        self.ssh_config.write_text(
            f"Host {' '.join(h.address for h in SSH_HOSTS)}\n  User root\n  IdentityFile {self.key}\n"
            f"  IdentitiesOnly yes\n  UserKnownHostsFile {self.state / 'known_hosts'}\n  StrictHostKeyChecking yes\n")
        for h in SSH_HOSTS:  # the GPU host's forwards the engine's socket; the load host's, its master's port
            hostfs.put(h, f"{HOST_ETC}/host_ed25519", (self.state / "host_ed25519").read_bytes())
            hostfs.put(h, f"{HOST_ETC}/authorized_keys", Path(f"{self.key}.pub").read_bytes(), 0o644)
            hostfs.put(h, self._sshd_config(h), (
                f"ListenAddress {h.address}\nPort 22\nHostKey {HOST_ETC}/host_ed25519\n"
                f"AuthorizedKeysFile {HOST_ETC}/authorized_keys\nPermitRootLogin prohibit-password\n"
                "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
                "PidFile /run/sshd-lab.pid\nAllowStreamLocalForwarding yes\nAllowTcpForwarding yes\n").encode(), 0o644)

    @staticmethod
    def _sshd_name(h: Host) -> str:
        return "sshd" if h is GPU else f"sshd-{h.name}"

    @staticmethod
    def _sshd_config(h: Host) -> str:  # on the host's own filesystem
        return f"{HOST_ETC}/sshd_config"

    def ssh_ok(self, h: Host) -> bool:
        """Whether the lab's key logs in to host `h` (as the harness will)."""
        return _run("ssh", "-F", str(self.ssh_config), "-o", "BatchMode=yes", "-o", "ConnectTimeout=2",
                    h.address, "true", check=False).returncode == 0

    def _pidfile(self, name: str) -> Path:  # the lab's own record (sshd writes its PidFile elsewhere)
        return self.state / f"{name}.lab-pid"

    def spawn(self, name: str, cmd: list[str], host: Host | None = None, env: dict[str, str] | None = None) -> int:
        """Run `cmd` on a lab host in its own session, in the working directory's path as that host sees
        it, logging to the host's own /var/log/chaos-lab; a running one of the same name is kept (up is
        idempotent). Its pid; `down` stops it."""
        h = host or GPU
        if (pid := self._pid(name)) is not None and _proc.alive(pid):
            return pid
        # nsenter, not `ip netns exec`: that also remounts /sys, which hides the cgroup mounts dockerd
        # needs; both namespaces, so the host's network and its own filesystem (sh execs cmd: same pid)
        p = subprocess.Popen([*hostfs.enter(h), *hostfs.in_dir(os.getcwd(), self.host_log(name), cmd)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                             start_new_session=True, env={**host_environ(), **(env or {})})
        self._pidfile(name).write_text(f"{p.pid} {h.name}\n")
        return p.pid

    @staticmethod
    def host_log(name: str) -> str:
        """Where what spawn(name) prints goes, on its host."""
        return f"{hostfs.LOG_DIR}/{name}.log"

    def _host_of(self, name: str) -> Host:
        pidfile = self._pidfile(name)
        words = pidfile.read_text().split() if pidfile.exists() else []
        return next((h for h in HOSTS if words[1:] == [h.name]), GPU)

    def stop(self, name: str) -> bool:
        """Stop what spawn(name) started (its whole session); whether it was running."""
        pid = self._pid(name)
        if pid is None:
            return False
        running = _proc.alive(pid)
        if running:
            _stop(pid)
        self._pidfile(name).unlink(missing_ok=True)
        return running

    def wait_up(self, what: str, ok: Callable[[], object], timeout: float = 60.0) -> None:
        """Poll `ok()` until true; else a StackError with the last line of `what`'s log on its host."""
        deadline = time.monotonic() + timeout
        while not ok():
            if time.monotonic() > deadline:
                h = self._host_of(what)
                tail = hostfs.tail(h, self.host_log(what))
                raise StackError(f"lab: {what} not up within {timeout:g} s; last line of {self.host_log(what)} "
                                 f"on the {h.name} host: {tail}")
            time.sleep(0.2)

    def gpu_docker(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`docker` on the GPU host against its engine's socket, as a team's deploy tool on that host would."""
        return _run(*hostfs.enter(GPU), "docker", "-H", f"unix://{ENGINE_SOCKET}", *args, check=False)

    def _pid(self, name: str) -> int | None:
        """The pid spawn(name) recorded, if any."""
        pidfile = self._pidfile(name)
        return int(pidfile.read_text().split()[0] or 0) if pidfile.exists() else None

    def _running(self, name: str) -> bool:
        pid = self._pid(name)
        return pid is not None and _proc.alive(pid)

    def up(self) -> Lab:
        why = missing()
        if why:
            raise StackError(why)
        needed = [p for p in harness_paths() if os.path.lexists(p)]
        shared = shared_paths(needed)  # refused before anything is made
        if not (self._running("sshd") or self._running("dockerd")):
            # nothing of this state runs: whatever runs on the lab's hosts is left from a lab whose
            # run was killed (or whose state is gone), and it holds the addresses and the engine's pidfile;
            # the hosts' filesystems go with it, so a lab comes up as fresh machines
            reap_hosts()
            hostfs.remove_all(HOSTS)
        for h in HOSTS:
            self._netns(h)
            if not hostfs.make(h, HOST_DIRS.get(h.name, ()), shared) and (lost := hostfs.unseen(h, needed)):
                raise StackError(f"lab: the {h.name} host cannot see {lost[0]}: its filesystem was made by a lab up "
                                 "from elsewhere; `chaos lab down` first")
        self._keys()
        self._routing()
        for h in SSH_HOSTS:
            self.spawn(self._sshd_name(h), ["/usr/sbin/sshd", "-D", "-e", "-f", self._sshd_config(h)], host=h)
        # the engine's data root is a memory filesystem of the GPU host's own (overlay2 needs a real upper)
        self.spawn("dockerd", ["dockerd", "--host", f"unix://{ENGINE_SOCKET}", "--data-root", "/var/lib/chaos-lab/gpu",
                                "--exec-root", "/run/chaos-lab/gpu/exec", "--pidfile", "/run/chaos-lab/gpu/dockerd.pid",
                                "--bridge", "none", "--iptables=false", "--ip6tables=false", "--ip-masq=false",
                                "--cgroup-parent", "chaos-lab-gpu"])
        for h in SSH_HOSTS:
            self.wait_up(self._sshd_name(h), partial(self.ssh_ok, h))
        self.wait_up("dockerd", lambda: self.gpu_docker("version").returncode == 0)
        return self

    def docker_host(self) -> str:
        return f"ssh://root@{GPU.address}{ENGINE_SOCKET}"

    def load_image(self, image: str) -> None:
        """Copy an image of the machine's engine into the GPU host's (no registry here)."""
        fmt = ("--format", "{{.Id}}")
        have = self.gpu_docker("image", "inspect", *fmt, image)
        want = _run("docker", "image", "inspect", *fmt, image, check=False)
        if have.returncode == 0 and have.stdout.strip() == want.stdout.strip():
            return  # the same image (a rebuilt one under the same tag is copied again)
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        load = subprocess.run([*hostfs.enter(GPU), "docker", "-H", f"unix://{ENGINE_SOCKET}", "load", "-q"],
                              stdin=save.stdout, capture_output=True, text=True, timeout=600)
        save.wait(600)
        if save.returncode or load.returncode:
            raise StackError(f"lab: copying {image} to the GPU host failed: {load.stderr.strip()[-300:]}")

    def down(self) -> list[str]:
        """Stop the GPU host's containers, engine and sshd; delete the namespaces and the hosts'
        filesystems. What was removed."""
        done = []
        if hostfs.exists(GPU) and Path(f"/var/run/netns/{GPU.netns}").exists():
            ids = self.gpu_docker("ps", "-aq").stdout.split()
            if ids:
                self.gpu_docker("rm", "-f", *ids)
                done.append(f"{len(ids)} container(s) on the GPU host")
        # what was spawned last goes first: the services before the engine and sshd
        spawned = sorted(self.state.glob("*.lab-pid"), key=lambda p: p.stat().st_mtime, reverse=True) \
            if self.state.exists() else []
        for pidfile in spawned:
            name = pidfile.name.removesuffix(".lab-pid")
            if self.stop(name):
                done.append(name)
        done += [f"stray pid {pid}" for pid in reap_hosts()]  # a lab whose state is lost
        if shutil.which("iptables") and _run("iptables", "-C", *FORWARD_RULE, check=False).returncode == 0:
            _run("iptables", "-D", *FORWARD_RULE, check=False)
        orig = self.state / "ip_forward.orig"
        if orig.exists():
            Path("/proc/sys/net/ipv4/ip_forward").write_text(orig.read_text())
            orig.unlink()
        for h in HOSTS:
            if _run("ip", "link", "show", h.veth, check=False).returncode == 0:
                _run("ip", "link", "del", h.veth, check=False)
            if h.netns in _run("ip", "netns", "list", check=False).stdout.split():
                _run("ip", "netns", "del", h.netns, check=False)
                done.append(f"namespace {h.netns}")
        done += hostfs.remove_all(HOSTS)  # their processes are gone: the kernel frees what they wrote
        netns_dir = Path("/var/run/netns")  # `ip netns add` made it a mount; gone with the last namespace
        if netns_dir.is_dir() and not any(netns_dir.iterdir()):
            _run("umount", str(netns_dir), check=False)
        return done


def reap_hosts() -> list[int]:
    """Stop every process whose network or filesystem is one of the lab hosts'; the pids stopped."""
    inodes = set()
    for h in HOSTS:
        try:
            inodes.add(("net", os.stat(f"/var/run/netns/{h.netns}").st_ino))
        except OSError:
            pass
    inodes |= {("mnt", ino) for ino in hostfs.mount_ns_inodes(HOSTS)}
    if not inodes:
        return []
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if any((kind, os.stat(f"/proc/{entry}/ns/{kind}").st_ino) in inodes for kind in ("net", "mnt")):
                    found.append(int(entry))
            except OSError:
                pass  # gone meanwhile
    found = [p for p in found if _proc.alive(p)]
    for sig in (signal.SIGCONT, signal.SIGTERM):
        for pid in found:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 10.0  # dockerd stops its containers on SIGTERM: give it the time
    while time.monotonic() < deadline and any(_proc.alive(p) for p in found):
        time.sleep(0.1)
    for pid in found:
        if _proc.alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return found


def _stop(pid: int) -> None:
    _proc.kill_group(pid, timeout=15.0)  # its own session: sshd or dockerd and what they started
    try:  # reap it when this process started it (the tests), so no zombie is left
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
