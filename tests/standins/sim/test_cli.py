"""Flags, startup ordering, and the `chaos sim` entry point."""
from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from chaos.errors import ConfigError
from chaos.stack.sim.cli import parse_config
from chaos.stack.sim.faults import parse_flag
from tests.standins.sim.conftest import ROOT, Sim


@pytest.mark.parametrize("args,needle", [
    (["--bogus"], "unrecognized arguments"),
    (["--profile", "tpu"], "--profile"),
    (["--block-size", "7"], "--block-size"),
    (["--fault", "melt"], "--fault"),
    (["--tensor-parallel-size", "2", "--tp-ports", "1,2"], "--tp-ports"),
    (["--tp-connect", "nohost"], "--tp-connect"),
    (["--time-scale", "0"], "--time-scale"),
])
def test_bad_flags_one_line_exit_2(args: list[str], needle: str) -> None:
    r = subprocess.run([sys.executable, "-m", "chaos.stack.sim", *args], capture_output=True,
                       text=True, cwd=ROOT, timeout=30)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr


def test_chaos_sim_command_passes_flags() -> None:
    r = subprocess.run([sys.executable, "-m", "chaos.cli", "sim", "--block-size", "7"],
                       capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert r.returncode == 2 and "--block-size" in r.stderr


def test_fault_flag_forms() -> None:
    assert parse_flag("slow:3") == ("slow", {"factor": 3.0})
    assert parse_flag("stall:after_tokens=2,seconds=1.5")[1] == {"after_tokens": 2, "seconds": 1.5,
                                                                  "fraction": 1.0}
    with pytest.raises(ConfigError, match="fraction"):
        parse_flag("truncate:fraction=2")
    cfg = parse_config(["--kv-tokens", "1600", "--block-size", "32", "-tp", "3"])
    assert cfg.num_gpu_blocks == 50 and len(cfg.tp_ports) == 2 and len(cfg.tp_connect) == 2


def test_port_refuses_until_ready(sim_factory) -> None:  # noqa: ANN001
    s: Sim = sim_factory("--startup-delay", "1.5", "--tensor-parallel-size", "2", wait=False)
    time.sleep(0.8)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", s.port), timeout=1).close()
    assert "Application startup complete." not in s.output
    s.wait_ready()
    assert s.request("GET", "/health")[0] == 200
    assert s.output.splitlines().count("Application startup complete.") == 1


def test_sigterm_exits_zero_and_reaps_ranks(sim_factory) -> None:  # noqa: ANN001
    import psutil

    s: Sim = sim_factory("--tensor-parallel-size", "2")
    ranks = s.rank_pids()
    s.proc.terminate()
    assert s.proc.wait(5) == 0
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in ranks)
