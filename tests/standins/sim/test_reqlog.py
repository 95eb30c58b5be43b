"""The simulator's request log keeps every line, even one written after the shutdown closed it."""
from __future__ import annotations

import json

from chaos.stack.sim.reqlog import RequestLog


def test_a_line_written_after_close_still_reaches_the_file(tmp_path) -> None:
    # on SIGTERM the server closes its log while a stream is still finishing; that stream's line
    # was dropped, and the client held a success the log lacked (lab, docker restart)
    path = tmp_path / "r.requests.jsonl"
    log = RequestLog(str(path))
    log.write({"request_id": "a"})
    log.close()
    log.write({"request_id": "b"})
    assert [json.loads(line)["request_id"] for line in path.read_text().splitlines()] == ["a", "b"]
    assert log.enabled


def test_no_path_writes_nothing(tmp_path) -> None:
    log = RequestLog(None)
    log.write({"request_id": "a"})
    log.close()
    assert not log.enabled and list(tmp_path.iterdir()) == []
