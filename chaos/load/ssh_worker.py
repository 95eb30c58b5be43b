"""The far end of a Locust worker on another host, started over SSH by the runner
(`python -m chaos.load.ssh_worker --master-port P`, on the load host).

The load host shares no files with the harness, so everything travels over the SSH session:
  stdin   one JSON line {"config": LoadConfig fields, "prompts": text of a prompts file or null};
          then nothing: its end (the harness or its ssh went away) stops the worker
  stdout  `S <hostname>` once locust started, then `R <file> <record>` for each record line the
          worker wrote, `M <file> <json>` for its meta file at the end; the runner writes each line
          into <out_dir>/<file>, so the run merges them as if the worker had written them there
  stderr  locust's own output (the runner's log of this worker)
Exit status: locust's, or 128 + N when signal N killed it (the runner reports it as such)."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from chaos.load.config import ENV_CONFIG, ENV_OUT_DIR

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
STOP_GRACE_S = 5.0  # after the harness went away: locust's own stop, then a kill


class Pump:
    """Sends the complete lines the worker appended to its record files since the last call."""

    def __init__(self, out_dir: Path, out: BinaryIO) -> None:
        self.out_dir, self.out = out_dir, out
        self.offsets: dict[Path, int] = {}

    def __call__(self) -> None:
        for path in sorted(self.out_dir.glob("records-*.jsonl")):
            off = self.offsets.get(path, 0)
            with open(path, "rb") as f:
                f.seek(off)
                chunk = f.read()
            end = chunk.rfind(b"\n") + 1  # a half-written last line waits for the next call
            if end:
                tag = b"R " + path.name.encode() + b" "
                self.out.write(b"".join(tag + line + b"\n" for line in chunk[:end].splitlines() if line.strip()))
                self.out.flush()
                self.offsets[path] = off + end

    def metas(self) -> None:
        for path in sorted(self.out_dir.glob("meta-*.json")):
            text = " ".join(path.read_text(encoding="utf-8").split())
            self.out.write(f"M {path.name} {text}\n".encode())
        self.out.flush()


def _job(line: bytes, work: Path) -> Path:
    """Write the job's config (and prompts file) into `work`; the config's path."""
    job = json.loads(line)
    cfg = dict(job["config"], out_dir=str(work))
    if job.get("prompts") is not None:
        (work / "prompts.jsonl").write_text(job["prompts"], encoding="utf-8")
        cfg["prompts_file"] = str(work / "prompts.jsonl")
    path = work / "load-config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m chaos.load.ssh_worker")
    ap.add_argument("--master-host", default="127.0.0.1", help="where the master is reached (the ssh forward)")
    ap.add_argument("--master-port", type=int, required=True)
    args = ap.parse_args(argv)
    first = sys.stdin.buffer.readline()
    if not first.strip():
        print("ssh_worker: no job on stdin", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="chaos-load-worker-"))
    try:
        env = dict(os.environ, **{ENV_CONFIG: str(_job(first, work))})
        env.pop(ENV_OUT_DIR, None)
        locust = subprocess.Popen([sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--loglevel", "WARNING",
                                   "--worker", "--master-host", args.master_host, "--master-port", str(args.master_port)],
                                  stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno(), stderr=subprocess.STDOUT,
                                  env=env, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        return _serve(locust, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _until_eof(then: Callable[[], object]) -> None:
    # os.read, not sys.stdin: a daemon thread blocked in the buffered reader holds its lock, and the
    # interpreter then aborts at exit ("could not acquire lock for <stdin> at interpreter shutdown")
    while os.read(0, 65536):
        pass
    then()


def _serve(locust: subprocess.Popen[bytes], work: Path) -> int:
    out = sys.stdout.buffer
    stopping: list[float] = []

    def stop(*_: object) -> None:  # locust's own stop (SIGINT flushes its records), once
        if not stopping:
            stopping.append(time.monotonic())
            if locust.poll() is None:
                locust.send_signal(signal.SIGINT)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, stop)
    # the harness, or the ssh between us, went away: nobody reads what this worker sends any more
    threading.Thread(target=_until_eof, args=(stop,), daemon=True).start()
    pump = Pump(work, out)
    try:
        out.write(f"S {socket.gethostname()}\n".encode())
        out.flush()
        while locust.poll() is None:
            pump()
            if stopping and time.monotonic() - stopping[0] > STOP_GRACE_S:
                locust.kill()
            time.sleep(0.2)
        pump()
        pump.metas()
    except BrokenPipeError:  # the ssh is gone: stop the worker rather than send into nothing
        stop()
        try:
            locust.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            locust.kill()
    rc = locust.wait()
    if rc < 0:
        print(f"ssh_worker: locust was killed by {signal.Signals(-rc).name}", file=sys.stderr, flush=True)
    return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    sys.exit(main())
