"""A lab host sees a directory of this machine under its own /tmp read-through (a real mount namespace made
by chaos.stack.lab_hostfs, for a host of the test's own: no network namespace, no lab needed), its writes
staying on it; and `chaos lab up` run from a directory under /run refuses at once, in one line naming it."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from chaos.pytest_plugin import require_component
from tests.integration.cli.test_cli import REPO


@dataclass(frozen=True)
class _Host:
    name: str
    netns: str


def _root_and_tools() -> None:
    reason = None if os.geteuid() == 0 else "needs root (mount namespaces)"
    for tool in ("unshare", "nsenter", "mount"):
        reason = reason or (None if shutil.which(tool) else f"needs `{tool}`")
    require_component("lab", reason)


def test_a_directory_under_tmp_is_shown_to_a_host_read_through() -> None:
    from chaos.stack import lab_hostfs as hostfs

    _root_and_tools()
    ns_dir_was_mounted = hostfs._mounted(hostfs.NS_DIR)
    shared = Path(tempfile.mkdtemp(prefix="lab-share-", dir="/tmp"))
    hidden = Path(tempfile.mkdtemp(prefix="lab-hidden-", dir="/tmp"))
    h = _Host(f"share-{uuid.uuid4().hex[:6]}", "share-test")
    try:
        (shared / "from-harness").write_text("harness\n")
        (hidden / "from-harness").write_text("harness\n")
        assert hostfs.shares([str(shared / "from-harness")]) == ((str(shared),), [])
        assert hostfs.make(h, (), (str(shared),))

        def on_host(script: str) -> subprocess.CompletedProcess[bytes]:
            return subprocess.run(["nsenter", f"--mount={hostfs.ns_file(h)}", "sh", "-c", script],
                                  capture_output=True, timeout=10)

        assert on_host(f"cat {shared}/from-harness").stdout == b"harness\n"
        assert on_host(f"test -e {hidden}/from-harness").returncode == 1  # the rest of /tmp is the host's own
        assert on_host(f"echo host > {shared}/from-host && cat {shared}/from-host").stdout == b"host\n"
        assert sorted(os.listdir(shared)) == ["from-harness"]  # the host's write stayed on it
        (shared / "later").write_text("later\n")  # read through, not a copy made at start
        assert on_host(f"cat {shared}/later").stdout == b"later\n"
    finally:
        hostfs.remove(h)
        if not ns_dir_was_mounted:  # no lab is up: leave no namespace directory behind either
            hostfs.remove_all(())
        shutil.rmtree(shared)
        shutil.rmtree(hidden)


def test_lab_up_from_a_checkout_under_run_is_refused_at_once_in_one_line() -> None:
    from chaos.stack.lab import missing

    require_component("lab", missing())
    where = Path(tempfile.mkdtemp(prefix="lab-refused-", dir="/run"))
    try:
        started = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "chaos.cli", "lab", "up", "--env", "lab", "--state-dir",
                            str(where / "state")], cwd=where, capture_output=True, text=True, timeout=60,
                           env={**os.environ, "PYTHONPATH": str(REPO), "CHAOS_ENV_DIR": str(REPO / "environments")})
        took = time.monotonic() - started
        assert r.returncode == 2 and took < 5, (took, r.stdout, r.stderr)
        said = (f"chaos: error: lab: the hosts cannot see {where}: each lab host has its own /run "
                "(chaos/stack/lab_hostfs.py); put the checkout, its .tools and the venv elsewhere")
        assert r.stderr.strip().splitlines() == [said], r.stderr
        assert not (where / "state").exists()  # nothing was made
    finally:
        shutil.rmtree(where)
