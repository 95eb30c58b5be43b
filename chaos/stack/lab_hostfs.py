"""Each lab host's own filesystem: a mount namespace whose root is private to the host.

A lab host shares the harness's kernel, not its files. Its root is an overlay of this machine's `/`
(read-through, so sshd, dockerd, the venv and `.tools` are there without a copy) with an upper
layer in memory: every write a host makes stays in its own namespace and disappears with it. On
top, fresh memory filesystems for `/tmp`, `/run`, `/dev/shm`, `/var/lib/docker` and
`/var/lib/chaos-lab` (the Docker engine's data root: overlay2 refuses an upper layer on overlay).
A request log, a pid file or a container's writes on the GPU host therefore never appear in the
harness's filesystem; what the harness learns of them comes over the network.

Why an overlay and not a debootstrap root: the lab hosts need this machine's binaries (dockerd,
sshd, the harness's own interpreter for Locust workers and the gateway) at the same paths, and a
read-through overlay gives them in milliseconds without a 300 MB copy per host; what makes the host
"another machine" for the harness is that nothing it writes is shared, which the upper layer gives.

The namespace is kept by its nsfs file bind-mounted at /run/chaos-lab/ns/<host> (no process needs
to live in it); it is entered with nsenter, which sets the root and working directory to the
host's own. `remove` unmounts that file: with the host's processes gone, the kernel frees the
namespace and every filesystem in it.
"""
from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Protocol

from chaos.errors import StackError


class Host(Protocol):
    """What a host's filesystem needs of a lab host (chaos.stack.lab.Host): its name and its network namespace."""

    @property
    def name(self) -> str: ...

    @property
    def netns(self) -> str: ...


NS_DIR = Path("/run/chaos-lab/ns")
LOG_DIR = "/var/log/chaos-lab"  # on each host: what the lab's services print

# Runs inside the new namespace (`sh -c SETUP sh NAME DIR... -- SHARED...`), before anything of the host starts:
# each DIR is made on the host, each SHARED directory of this machine is shown read-through (see `shares`).
# Scratch space for the overlay's layers is a tmpfs over /run, private to the namespace from the first
# line on, so even the setup writes nothing to the machine's disk.
SETUP = r"""set -e
name=$1; shift
mount --make-rprivate /
mount -t tmpfs -o mode=0755 "$name-layers" /run
mkdir /run/upper /run/work /run/root
mount -t overlay "$name-root" -o lowerdir=/,upperdir=/run/upper,workdir=/run/work /run/root
r=/run/root
mount --rbind /dev "$r/dev"
mount --rbind /sys "$r/sys"
mount -t proc proc "$r/proc"
mount -t tmpfs -o mode=1777 "$name-shm" "$r/dev/shm"
mount -t tmpfs -o mode=1777 "$name-tmp" "$r/tmp"
mount -t tmpfs -o mode=0755 "$name-run" "$r/run"
for d in /var/lib/docker /var/lib/chaos-lab; do
  mkdir -p "$r$d"; mount -t tmpfs -o mode=0711 "$name-$(basename $d)" "$r$d"
done
while [ $# -gt 0 ] && [ "$1" != "--" ]; do mkdir -p "$r$1"; shift; done
[ $# -gt 0 ] && shift
n=0
for d in "$@"; do
  n=$((n + 1)); mkdir -p "/run/share$n/upper" "/run/share$n/work" "$r$d"
  mount -t overlay "$name-share$n" -o "lowerdir=$d,upperdir=/run/share$n/upper,workdir=/run/share$n/work" "$r$d"
done
cd "$r"; mkdir .oldroot; pivot_root . .oldroot; cd /
umount -l /.oldroot; rmdir /.oldroot
"""


# what each host has of its own, hiding this machine's: a path under one is not the harness's on a host
MASKED = ("/tmp", "/dev/shm", "/run", "/var/lib/docker", "/var/lib/chaos-lab")
# of those, where the harness's own paths may be shown to the hosts: each gets a read-through overlay of its
# own (what a host writes there stays on it, as on its root); /run is masked before the setup could reach
# it, and the engine's data roots are no place for a checkout
SHAREABLE = ("/tmp", "/dev/shm")


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root + "/")


def shares(paths: list[str]) -> tuple[tuple[str, ...], list[tuple[str, str]]]:
    """What a host must be shown of this machine so that it sees every one of `paths` at its own path (as
    given and as resolved): the directories to overlay, and (path, why) for each path no host can see."""
    dirs: list[str] = []
    refused: list[tuple[str, str]] = []
    for given in paths:
        for p in dict.fromkeys((os.path.abspath(given), os.path.realpath(given))):
            mask = next((m for m in MASKED if _under(p, m)), None)
            if mask is None or p == mask or not os.path.lexists(p):  # the mask itself: the host's own is meant
                continue
            if mask not in SHAREABLE:
                refused.append((p, f"each lab host has its own {mask} (chaos/stack/lab_hostfs.py)"))
                continue
            d = p if os.path.isdir(p) and not os.path.islink(p) else os.path.dirname(p)
            if d == mask:  # a file right in it: its directory is the host's own, not this machine's to show
                refused.append((p, f"each lab host has its own {mask}; a directory below it can be shown"))
                continue
            if any(c in d for c in ":,\\"):  # overlay's option syntax has no quoting for them
                refused.append((p, "a lab host can be shown no path with ':', ',' or '\\' in it (overlay options)"))
                continue
            dirs.append(d)
    kept = [d for d in sorted(set(dirs)) if not any(_under(d, o) and d != o for o in dirs)]
    return tuple(kept), list(dict.fromkeys(refused))


def unseen(h: Host, paths: list[str]) -> list[str]:
    """Which of `paths` host `h` does not have (a host made before they were shared)."""
    r = run(h, ["sh", "-c", 'for p; do [ -e "$p" ] || [ -L "$p" ] || echo "$p"; done', "sh", *paths], timeout=10)
    return r.stdout.decode(errors="replace").splitlines() if r.returncode == 0 else list(paths)


def ns_file(h: Host) -> Path:
    return NS_DIR / h.name


def _mounted(path: Path) -> bool:
    """Whether `path` is a mount point in this (the harness's) mount namespace."""
    target = str(path)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == target for line in f)


def exists(h: Host) -> bool:
    return _mounted(ns_file(h))


def make(h: Host, dirs: tuple[str, ...] = (), shared: tuple[str, ...] = ()) -> bool:
    """Give host `h` its own root filesystem (idempotent: an existing one is kept, with what it holds);
    `dirs` are made in it, `shared` directories of this machine under its own /tmp or /dev/shm are shown
    read-through (`shares`). Whether a new one was made."""
    if exists(h):
        return False
    NS_DIR.mkdir(parents=True, exist_ok=True)
    if not _mounted(NS_DIR):  # unshare binds the namespace file only onto a private mount
        _sh(["mount", "--bind", str(NS_DIR), str(NS_DIR)])
        _sh(["mount", "--make-private", str(NS_DIR)])
    ns_file(h).touch()
    r = subprocess.run(["unshare", f"--mount={ns_file(h)}", "--propagation", "private", "sh", "-c", SETUP, "sh",
                        h.netns, LOG_DIR, *dirs, "--", *shared], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        remove(h)
        last = (r.stderr or r.stdout).strip().splitlines()[-1:]
        raise StackError(f"lab: the {h.name} host's filesystem could not be made: {last}")
    return True


def remove(h: Host) -> bool:
    """Drop host `h`'s filesystem (its processes must be gone first, or they keep it); whether one was there."""
    path = ns_file(h)
    was = exists(h)
    if was:
        _sh(["umount", str(path)])
    path.unlink(missing_ok=True)
    return was


def remove_all(hosts: tuple[Host, ...]) -> list[str]:
    """Drop every host's filesystem and the namespace directory; what was dropped."""
    done = [f"filesystem of {h.name}" for h in hosts if remove(h)]
    if _mounted(NS_DIR):
        _sh(["umount", str(NS_DIR)])
    for d in (NS_DIR, NS_DIR.parent):
        try:
            d.rmdir()
        except OSError:
            pass  # not there, or something else of the lab's still in it
    return done


def enter(h: Host) -> list[str]:
    """The command prefix that runs a program on host `h`: its network and its own filesystem."""
    return ["nsenter", f"--net=/var/run/netns/{h.netns}", f"--mount={ns_file(h)}"]


def in_dir(cwd: str, log: str, cmd: list[str]) -> list[str]:
    """`cmd` started in `cwd` as the host sees it (its root when the host has no such directory), with
    its output appended to `log` on the host. nsenter's own --wd would open the harness's directory."""
    script = 'cd "$1" 2>/dev/null || cd /; log=$2; shift 2; exec "$@" >>"$log" 2>&1'
    return ["sh", "-c", script, "sh", cwd, log, *cmd]


def run(h: Host, cmd: list[str], *, input: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    """Run `cmd` on host `h` (the console of a machine: what the lab's own deployment uses)."""
    return subprocess.run([*enter(h), *cmd], input=input, capture_output=True, timeout=timeout)


def put(h: Host, path: str, data: bytes, mode: int = 0o600) -> None:
    """Write a file onto host `h` (as a deploy tool copies a config or a secret onto a machine)."""
    script = f'mkdir -p "$(dirname "$1")" && umask 077 && cat > "$1" && chmod {mode:o} "$1"'
    r = run(h, ["sh", "-c", script, "sh", path], input=data)
    if r.returncode != 0:
        raise StackError(f"lab: writing {path} on the {h.name} host failed: {r.stderr.decode(errors='replace').strip()}")


def own_dir(h: Host, path: str) -> bool:
    """Make `path` on host `h` an empty directory of its own (a memory filesystem), hiding what this
    machine's disk has there; a no-op when it already is one. Whether it was made now."""
    script = 'mountpoint -q "$1" && exit 3; mkdir -p "$1" && mount -t tmpfs -o mode=0755 "$2" "$1"'
    r = run(h, ["sh", "-c", script, "sh", path, f"{h.netns}-own"])
    if r.returncode not in (0, 3):
        raise StackError(f"lab: {path} on the {h.name} host: {r.stderr.decode(errors='replace').strip()}")
    return r.returncode == 0


def tail(h: Host, path: str, lines: int = 1) -> list[str]:
    """The last lines of a file on host `h` ([] when it has none)."""
    r = run(h, ["tail", "-n", str(lines), path], timeout=10)
    return r.stdout.decode(errors="replace").strip().splitlines() if r.returncode == 0 else []


def _sh(cmd: list[str]) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise StackError(f"lab: `{shlex.join(cmd)}` failed: {r.stderr.strip()}")


def mount_ns_inodes(hosts: tuple[Host, ...]) -> set[int]:
    """The inode numbers of the hosts' mount namespaces (to find the processes inside them)."""
    out = set()
    for h in hosts:
        if exists(h):
            try:
                out.add(os.stat(ns_file(h)).st_ino)
            except OSError:
                pass
    return out
