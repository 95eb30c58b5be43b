"""The stop file `chaos stop` writes (`<state_dir>/STOP`: who asked, when, why) and a running experiment polls
(chaos.experiment.stop). Here, apart from the experiment package, because an emergency stop must be quick: through
chaos.experiment the command spent about 1 s importing the whole runner before it wrote the file, 2 s in all."""
from __future__ import annotations

import getpass
import json
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

STOP_FILE = "STOP"


def stop_file(state_dir: str | os.PathLike[str]) -> Path:
    return Path(state_dir) / STOP_FILE


def request_stop(state_dir: str | os.PathLike[str], reason: str = "", *, clock: Callable[[], float] = time.time) -> Path:
    """What `chaos stop` does: write the stop file, naming who asked."""
    who = f"chaos stop ({getpass.getuser()}@{socket.gethostname()}, pid {os.getpid()})"
    path = stop_file(state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"by": who, "reason": reason, "t": clock()}), encoding="utf-8")
    tmp.replace(path)  # whole or not at all: the runner never reads half a file
    return path
