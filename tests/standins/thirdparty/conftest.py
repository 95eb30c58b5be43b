"""Third-party gateways: nginx and HAProxy from their Debian packages (skip without them, fail under
CHAOS_REQUIRE=gateways), the LiteLLM proxy from PyPI (`make setup-litellm`; CHAOS_REQUIRE=litellm)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from chaos.pytest_plugin import require_component


def binary_missing(name: str) -> str | None:
    if shutil.which(name) or Path(f"/usr/sbin/{name}").exists():
        return None
    return f"no `{name}` binary (Debian: apt-get install {name})"


def litellm_missing() -> str | None:
    from chaos.stack.thirdparty import litellm_binary

    return None if litellm_binary() else "no `litellm` (make setup-litellm)"


@pytest.fixture(params=["nginx", "haproxy"])
def checked_gateway_kind(request) -> str:
    """A gateway that checks its own config (nginx -t, haproxy -c)."""
    require_component("gateways", binary_missing(request.param))
    return request.param


@pytest.fixture(params=["nginx", "haproxy", "litellm"])
def gateway_kind(request) -> str:
    if request.param == "litellm":
        require_component("litellm", litellm_missing())
    else:
        require_component("gateways", binary_missing(request.param))
    return request.param
