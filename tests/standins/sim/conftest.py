"""Fixtures: the simulator as a real subprocess on a free port."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests._support import free_port  # noqa: F401 (test_tp imports it from here)

ROOT = Path(__file__).resolve().parents[3]
ADMIN = "admin-secret"


class Sim:
    """A running simulator process with captured output and tiny HTTP helpers."""

    def __init__(self, *args: str, wait: bool = True, port: int | None = None) -> None:
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "chaos.stack.sim", "--port", str(self.port),
               "--admin-token", ADMIN, *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, cwd=ROOT)
        self.lines: list[str] = []
        self._ready = threading.Event()
        threading.Thread(target=self._pump, daemon=True).start()
        if wait:
            self.wait_ready()

    def _pump(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.lines.append(line.rstrip("\n"))
            if line.strip() == "Application startup complete.":
                self._ready.set()

    def wait_ready(self, timeout: float = 20.0) -> None:
        if not self._ready.wait(timeout):
            raise AssertionError("simulator not ready:\n" + "\n".join(self.lines[-20:]))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def request(self, method: str, path: str, body: Any = None, headers: dict | None = None,
                raw: bytes | None = None, timeout: float = 10.0) -> tuple[int, bytes, dict]:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        rq = urllib.request.Request(self.base + path, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(rq, timeout=timeout) as r:
                return r.status, r.read(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read(), dict(e.headers)

    def admin(self, method: str, path: str = "/admin/faults", body: Any = None) -> tuple[int, Any]:
        st, data, _ = self.request(method, path, body, {"Authorization": f"Bearer {ADMIN}"})
        return st, json.loads(data) if data else None

    def rank_pids(self) -> list[int]:
        kids = psutil.Process(self.proc.pid).children(recursive=True)
        return [k.pid for k in kids if "chaos-sim-rank" in k.cmdline()]

    def stop(self) -> None:
        kids = []
        try:
            kids = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            pass
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for k in kids:
            try:
                os.kill(k.pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.fixture
def sim_factory() -> Iterator[Any]:
    started: list[Sim] = []

    def make(*args: str, **kw: Any) -> Sim:
        s = Sim(*args, **kw)
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    log = tmp_path_factory.mktemp("simlog") / "requests.jsonl"
    s = Sim("--served-model-name", "sim-model", "--max-model-len", "256",
            "--request-log", str(log))
    s.log_path = log  # type: ignore[attr-defined]
    try:
        yield s
    finally:
        s.stop()


def wait_for(pred: Any, timeout: float, interval: float = 0.05) -> bool:
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(interval)
    return bool(pred())
