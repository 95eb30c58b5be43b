"""Resolved settings of one simulator replica (flags + profile defaults)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chaos.errors import ConfigError
from chaos.shared.proc import free_port
from chaos.stack.sim.profiles import Profile, get_profile

BLOCK_SIZES = (1, 8, 16, 32, 64, 128)


@dataclass
class SimConfig:
    """Everything `chaos sim` was asked to run."""

    host: str = "127.0.0.1"
    port: int = 8000
    model: str = "sim-model"
    served_model_name: str | None = None
    profile: str = "instant"
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int = 16
    num_gpu_blocks: int | None = None
    max_model_len: int | None = None
    tensor_parallel_size: int = 1
    startup_delay: float = 0.0
    time_scale: float = 1.0
    seed: int = 0
    request_log: str | None = None
    admin_token: str | None = None
    api_key: str | None = None
    collective_timeout: float = 300.0
    tp_ports: list[int] = field(default_factory=list)
    tp_connect: list[tuple[str, int]] = field(default_factory=list)
    faults: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    enable_prefix_caching: bool = True
    # real vLLM 0.32: a watchdog started with the HTTP server checks the engine every 5 s; at the first
    # tick after the engine died the server shuts down, and the process exits 0.56-1.85 s after that tick
    watchdog_period: float = 5.0
    death_exit_delay: float = 0.8
    stats_interval: float = 10.0

    @property
    def name(self) -> str:
        return self.served_model_name or self.model

    def resolved_profile(self) -> Profile:
        return get_profile(self.profile)

    def finalize(self) -> SimConfig:
        """Fill profile defaults and check consistency; ConfigError names the flag."""
        prof = self.resolved_profile()
        self.max_num_seqs = self.max_num_seqs or prof.max_num_seqs
        self.max_num_batched_tokens = self.max_num_batched_tokens or prof.max_num_batched_tokens
        self.max_model_len = self.max_model_len or prof.max_model_len
        if self.num_gpu_blocks is None:
            self.num_gpu_blocks = max(1, prof.num_gpu_blocks * 16 // self.block_size)
        if self.block_size not in BLOCK_SIZES:
            raise ConfigError(f"--block-size: expected one of {BLOCK_SIZES}, got {self.block_size}")
        for flag, val in (("--max-num-seqs", self.max_num_seqs),
                          ("--max-num-batched-tokens", self.max_num_batched_tokens),
                          ("--num-gpu-blocks", self.num_gpu_blocks),
                          ("--max-model-len", self.max_model_len),
                          ("--tensor-parallel-size", self.tensor_parallel_size)):
            if val < 1:
                raise ConfigError(f"{flag}: expected a positive integer, got {val}")
        if not 0 < self.port < 65536:
            raise ConfigError(f"--port: expected 1-65535, got {self.port}")
        for flag, fval in (("--time-scale", self.time_scale),
                           ("--collective-timeout", self.collective_timeout)):
            if not fval > 0:
                raise ConfigError(f"{flag}: expected a positive number, got {fval}")
        if self.startup_delay < 0:
            raise ConfigError(f"--startup-delay: expected >= 0, got {self.startup_delay}")
        n = self.tensor_parallel_size - 1
        if self.tp_ports and len(self.tp_ports) != n:
            raise ConfigError(f"--tp-ports: expected {n} port(s) for --tensor-parallel-size "
                              f"{self.tensor_parallel_size}, got {len(self.tp_ports)}")
        if self.tp_connect and len(self.tp_connect) != n:
            raise ConfigError(f"--tp-connect: expected {n} address(es), got {len(self.tp_connect)}")
        if not self.tp_ports:
            self.tp_ports = [free_port() for _ in range(n)]
        if not self.tp_connect:
            here = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host  # where the ranks listen
            self.tp_connect = [(here, p) for p in self.tp_ports]
        return self
