"""The proof runs' real toxiproxy-server and upstream: the fault tests' own fixtures (tests/integration/faults)."""
from tests.integration.faults.conftest import proxy, toxiproxy_server, upstream  # noqa: F401
