"""Faults: inject()/revert() objects with proof of effect, a durable ledger, `&` and schedules."""
from chaos.faults.base import AllOf, Fault, Policy, Scheduled, configure, current_policy, listeners
from chaos.faults.container import kill, pause, restart, stop
from chaos.faults.engine import engine_death
from chaos.faults.ledger import Ledger, cleanup, install_signal_handlers
from chaos.faults.nccl import rank_freeze, rank_kill, rank_link_cut
from chaos.faults.network import bandwidth, down, jitter, latency, limit_data, reset_peer, slicer, slow_close, timeout
from chaos.faults.sim_admin import sim_fault
from chaos.shared.toxiproxy import Toxiproxy

__all__ = [
    "AllOf", "Fault", "Ledger", "Policy", "Scheduled", "Toxiproxy", "bandwidth", "cleanup", "configure",
    "current_policy", "down", "engine_death", "install_signal_handlers", "jitter", "kill", "latency", "limit_data", "listeners",
    "pause", "rank_freeze", "rank_kill", "rank_link_cut", "reset_peer", "restart", "sim_fault", "slicer", "slow_close", "stop",
    "timeout",
]
