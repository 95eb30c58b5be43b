"""One lab for the session: its hosts are network namespaces with fixed names, so there is one."""
from __future__ import annotations

import pytest

from chaos.pytest_plugin import require_component

IMAGE = "llm-chaos-base:bookworm"  # the locally made base (scripts/build-base.sh): it has python3


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    from chaos.stack.lab import Lab, missing
    from tests._support import _image_reason

    require_component("lab", missing(), also=("docker",))
    require_component("docker", _image_reason(IMAGE))
    lab = Lab(tmp_path_factory.mktemp("lab")).up()
    try:
        lab.load_image(IMAGE)
        yield lab
    finally:
        lab.down()


@pytest.fixture
def lab_ssh(lab, monkeypatch):
    from chaos.targets import ssh_docker

    monkeypatch.setenv("CHAOS_SSH_CONFIG", str(lab.ssh_config))
    yield lab
    ssh_docker.close_all()
