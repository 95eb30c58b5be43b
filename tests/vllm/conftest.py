"""One `vllm serve` (the tiny model, TP 1, eager) for the vLLM lane's tests that only send it requests: the
fidelity probe set and the fault proxy in front of it. Each started its own (20-25 s each on 2 cores);
none of them changes the server (the probes compare shapes, not counters), so they share one. Tests that
kill, freeze or restart vLLM start their own."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests._vllm import vllm_server


@pytest.fixture(scope="session")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with vllm_server(tmp_path_factory.mktemp("vllm")) as url:
        yield url
