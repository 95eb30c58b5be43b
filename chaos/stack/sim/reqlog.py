"""Ground-truth request log: one JSON line per request (`--request-log PATH`).

Fields: request_id (the client's x-request-id, else generated), t_arrival, t_scheduled,
t_first_token, t_finish (time.time() epoch seconds, null when the phase never happened;
t_first_token of a stream is the moment its first token's chunk started being written to the
socket, else when the step that produced it ended),
prompt_tokens, output_tokens, status (HTTP status sent), outcome (stop|length|abort|error|
rejected), model, stream, client (the peer's address). Each line reaches the OS as it is written (before a stream's last bytes
go out), so a SIGKILLed simulator never leaves a success the log lacks.
"""
from __future__ import annotations

import json
from typing import IO, Any


class RequestLog:
    """Buffered JSONL writer; `flush()` is called by a periodic task and at exit."""

    def __init__(self, path: str | None) -> None:
        self._path = path
        self._fh: IO[str] | None = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115
        self._buf: list[str] = []

    @property
    def enabled(self) -> bool:
        return self._path is not None

    def write(self, record: dict[str, Any]) -> None:
        if self._path is None:
            return
        line = json.dumps(record, separators=(",", ":"))
        if self._fh is None:
            # closed by the shutdown while a stream was still finishing (SIGTERM, `docker restart`):
            # its line must still be written, or the client holds a success the log lacks (seen on the lab)
            with open(self._path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
            return
        self._buf.append(line)
        self.flush()

    def flush(self) -> None:
        if self._fh is not None and self._buf:
            self._fh.write("\n".join(self._buf) + "\n")
            self._buf.clear()
            self._fh.flush()

    def close(self) -> None:
        self.flush()
        if self._fh is not None:
            self._fh.close()
            self._fh = None
