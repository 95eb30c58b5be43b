"""The `ps` that `docker top` runs on the engine's host, as chaos.targets.docker_procs asks it: whole command
lines whatever COLUMNS the engine has. Here with this machine's procps, as dockerd runs it (stdout a pipe),
on a process whose command line is a simulator rank's behind a long interpreter path."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from chaos.targets import docker_procs, titles


def _top(pid: int, environ: dict[str, str]) -> dict[str, object]:
    """What the engine answers for `docker top -o ...`: its `ps PS_ARGS` output, split as moby does (every
    field past the last title merged into the last column)."""
    out = subprocess.run(["ps", *docker_procs.PS_ARGS.split(" "), "-p", str(pid)], capture_output=True, text=True,
                         env=environ, check=True).stdout.splitlines()
    head = out[0].split()
    return {"Titles": head, "Processes": [line.split(None, len(head) - 1) for line in out[1:]]}


@pytest.mark.parametrize("columns", ["80", "132", None])
def test_a_rank_title_comes_back_whole_whatever_the_engines_columns(columns: str | None) -> None:
    """COLUMNS=80 in the GPU host dockerd's environment cut `... -m chaos.stack.sim.rank chaos-sim-rank 1`
    to `... -m chaos.stack.sim.ra` (the stand-ins lane on two xdist workers): no rank found."""
    rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "-m", "chaos.stack.sim.rank",
                             "chaos-sim-rank", "--rank", "1", "--host", "10.231.1.2", "--port", "8301"],
                            stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while "chaos-sim-rank" not in (whole := open(f"/proc/{rank.pid}/cmdline", "rb").read().replace(b"\0", b" ")
                                       .decode().strip()):
            assert time.monotonic() < deadline, whole
            time.sleep(0.05)
        assert len(whole) > 80  # the line a terminal-width ps would cut
        environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        if columns is not None:
            environ["COLUMNS"] = columns
        procs = docker_procs.parse_top(_top(rank.pid, environ), "lab-replica-a")
        assert [(p.pid, p.cmd) for p in procs] == [(rank.pid, whole)]
        assert titles.rank_pids([(p.pid, p.cmd) for p in procs], None) == [rank.pid]  # rank 1, and no engine
    finally:
        rank.kill()
        rank.wait(10)
