"""The fault proxy's binary and a ledger policy: the stand-ins' fault-proxy fixtures (tests/standins/faultproxy)."""
from tests.standins.faultproxy.conftest import faultproxy_bin, policy  # noqa: F401
