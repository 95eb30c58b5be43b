"""`chaos env check --probe`: is each part an environment names the thing the file says it is? One probe per
part (chaos.env_check.http, docker, gpu, monitoring), run in the order a request travels (chaos.env_check.run)."""
from chaos.env_check.http import Probe
from chaos.env_check.run import format_probes, probe

__all__ = ["Probe", "format_probes", "probe"]
