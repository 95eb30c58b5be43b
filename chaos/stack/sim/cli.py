"""`chaos sim` / `python -m chaos.stack.sim`: flag parsing and the process entry point."""
from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path
from typing import Any, NoReturn

from chaos.errors import ConfigError
from chaos.stack.sim import faults as F
from chaos.stack.sim.config import SimConfig


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"chaos sim: error: {message}", file=sys.stderr, flush=True)
        raise SystemExit(2)


def _ports(text: str) -> list[int]:
    try:
        out = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ports, got {text!r}") from None
    if any(not 0 < p < 65536 for p in out):
        raise argparse.ArgumentTypeError(f"ports must be 1-65535, got {text!r}")
    return out


def _addrs(text: str) -> list[tuple[str, int]]:
    out = []
    for part in text.split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise argparse.ArgumentTypeError(f"expected HOST:PORT[,HOST:PORT...], got {part!r}")
        out.append((host, int(port)))
    return out


def _fault(text: str) -> tuple[str, dict[str, Any]]:
    try:
        return F.parse_flag(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--fault: ")) from None


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="chaos sim", description="vLLM-compatible simulator replica.")
    a = ap.add_argument
    a("--host", default="127.0.0.1")
    a("--port", type=int, default=8000)
    a("--model", default="sim-model")
    a("--served-model-name", default=None)
    a("--profile", default="instant", choices=["a100-80g", "h200", "instant"])
    a("--max-num-seqs", type=int, default=None)
    a("--max-num-batched-tokens", type=int, default=None)
    a("--block-size", type=int, default=16)
    a("--num-gpu-blocks", type=int, default=None, help="KV blocks (or use --kv-tokens)")
    a("--kv-tokens", type=int, default=None, help="KV capacity in tokens (blocks = tokens/block size)")
    a("--max-model-len", type=int, default=None)
    a("--tensor-parallel-size", "-tp", type=int, default=1)
    a("--startup-delay", type=float, default=0.0)
    a("--time-scale", type=float, default=1.0)
    a("--seed", type=int, default=0)
    a("--request-log", default=None)
    a("--admin-token", default=None, help="admin token (visible in ps: prefer --admin-token-file)")
    a("--admin-token-file", default=None, help="file whose first line is the admin token")
    a("--api-key", default=None)
    a("--collective-timeout", type=float, default=300.0)
    a("--tp-ports", type=_ports, default=[])
    a("--tp-connect", type=_addrs, default=[])
    a("--fault", type=_fault, action="append", default=[], metavar="MODE[:ARG]")
    a("--no-enable-prefix-caching", action="store_true")
    a("--death-exit-delay", type=float, default=0.8, help=argparse.SUPPRESS)  # shutdown after the watchdog tick
    a("--watchdog-period", type=float, default=5.0, help=argparse.SUPPRESS)
    a("--stats-interval", type=float, default=10.0, help=argparse.SUPPRESS)
    return ap


def _admin_token(ns: argparse.Namespace) -> str | None:
    if ns.admin_token_file:
        try:
            return Path(ns.admin_token_file).read_text(encoding="utf-8").split()[0]
        except (OSError, IndexError):
            raise ConfigError(f"--admin-token-file {ns.admin_token_file}: cannot read a token from it") from None
    token: str | None = ns.admin_token
    return token


def parse_config(argv: list[str] | None) -> SimConfig:
    """Flags -> finalized SimConfig; ConfigError for inconsistent values."""
    ns = build_parser().parse_args(argv)
    blocks = ns.num_gpu_blocks
    if ns.kv_tokens is not None:
        blocks = max(1, ns.kv_tokens // max(1, ns.block_size))
    cfg = SimConfig(
        host=ns.host, port=ns.port, model=ns.model, served_model_name=ns.served_model_name,
        profile=ns.profile, max_num_seqs=ns.max_num_seqs,
        max_num_batched_tokens=ns.max_num_batched_tokens, block_size=ns.block_size,
        num_gpu_blocks=blocks, max_model_len=ns.max_model_len,
        tensor_parallel_size=ns.tensor_parallel_size, startup_delay=ns.startup_delay,
        time_scale=ns.time_scale, seed=ns.seed, request_log=ns.request_log,
        admin_token=_admin_token(ns), api_key=ns.api_key, collective_timeout=ns.collective_timeout,
        tp_ports=ns.tp_ports, tp_connect=ns.tp_connect, faults=ns.fault,
        enable_prefix_caching=not ns.no_enable_prefix_caching,
        death_exit_delay=ns.death_exit_delay, watchdog_period=ns.watchdog_period,
        stats_interval=ns.stats_interval)
    return cfg.finalize()


def setup_logging() -> None:
    h = logging.StreamHandler(sys.stdout)
    h.setFormatter(logging.Formatter("%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s",
                                     "%m-%d %H:%M:%S"))
    root = logging.getLogger()
    root.handlers[:] = [h]
    root.setLevel(logging.INFO)


def _runner() -> asyncio.Runner:
    try:
        import uvloop

        return asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        return asyncio.Runner()


def main(argv: list[str] | None = None) -> int:
    """Run one replica until it exits; returns the process exit code."""
    try:
        cfg = parse_config(argv)
    except SystemExit as e:
        return int(e.code or 0)
    except ConfigError as e:
        print(f"chaos sim: error: {e}", file=sys.stderr, flush=True)
        return 2
    setup_logging()
    from chaos.stack.sim.server import SimServer

    try:
        with _runner() as runner:
            return runner.run(SimServer(cfg).serve())
    except OSError as e:
        print(f"chaos sim: error: {e}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        return 0
