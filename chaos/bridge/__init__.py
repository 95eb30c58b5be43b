"""The bridge: an environment file -> running stand-ins (the embedded stack, a standby replica).

The one place where the harness's environment model meets chaos/stack; only the faces (the CLI commands and the
pytest plugin's fixtures) import it, so the harness and the stand-ins stay on their own sides of the wall
(tests/unit/verify/test_wall.py)."""
from chaos.bridge.launcher import EmbeddedStack, start_embedded, status
from chaos.bridge.standby import standby_replica

__all__ = ["EmbeddedStack", "standby_replica", "start_embedded", "status"]
