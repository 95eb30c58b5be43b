"""Environments: the pydantic model and the loader for environments/*.yaml."""
from chaos.env.loader import available, environments_dir, expand_vars, load, parse, resolve_path
from chaos.env.model import (
    BreakerPolicy,
    Endpoints,
    Environment,
    FaultProxyConfig,
    GatewayConfig,
    LatencySLA,
    LoadProfile,
    RetryPolicy,
    Safety,
    SimulatorOptions,
    SLAs,
    Target,
    ToxiproxyConfig,
    ToxiproxyProxy,
    VllmOptions,
)

__all__ = [
    "BreakerPolicy", "Endpoints", "Environment", "FaultProxyConfig", "GatewayConfig", "LatencySLA", "LoadProfile",
    "RetryPolicy", "Safety",
    "SimulatorOptions", "VllmOptions", "SLAs", "Target", "ToxiproxyConfig", "ToxiproxyProxy",
    "available", "environments_dir", "expand_vars", "load", "parse", "resolve_path",
]
