"""Third-party gateways (nginx, HAProxy) from their Debian packages: skip without them, fail under
CHAOS_REQUIRE=gateways."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from chaos.pytest_plugin import require_component


def binary_missing(name: str) -> str | None:
    if shutil.which(name) or Path(f"/usr/sbin/{name}").exists():
        return None
    return f"no `{name}` binary (Debian: apt-get install {name})"


@pytest.fixture(params=["nginx", "haproxy"])
def gateway_kind(request) -> str:
    require_component("gateways", binary_missing(request.param))
    return request.param
