"""The simulator serves its request log as the fault proxy does (GET /admin/log): whole lines from a cursor,
bounded pages, the admin token, and a clear error when it keeps no log."""
from __future__ import annotations

import json

import pytest

from chaos.stack.sim import logpage
from tests.standins.sim.conftest import wait_for


def _write(tmp_path, text: str):
    p = tmp_path / "r.requests.jsonl"
    p.write_bytes(text.encode())
    return str(p)


def test_pages_and_the_partial_last_line(tmp_path):
    path = _write(tmp_path, "".join(json.dumps({"request_id": f"r{i}", "t_arrival": i}) + "\n" for i in range(5))
                  + '{"request_id": "r5", "t_arr')
    first = logpage.read_page(path, 0, 2, None)
    assert [json.loads(x)["request_id"] for x in first["lines"]] == ["r0", "r1"] and first["more"]
    rest = logpage.read_page(path, first["next_cursor"], 10, None)
    assert [json.loads(x)["request_id"] for x in rest["lines"]] == ["r2", "r3", "r4"] and not rest["more"]
    assert rest["next_cursor"] < rest["size"]  # the unfinished line is left for later
    assert logpage.read_page(path, rest["next_cursor"], 10, None)["lines"] == []
    since = logpage.read_page(path, 0, 10, 3.0)
    assert [json.loads(x)["request_id"] for x in since["lines"]] == ["r3", "r4"]


def test_bad_cursors_and_parameters(tmp_path):
    path = _write(tmp_path, '{"a": 1}\n')
    for cursor, status, text in ((3, 400, "cursor 3 is not at the start of a line"),
                                 (50, 416, "cursor 50 is past the end of the log (9 bytes)")):
        with pytest.raises(logpage.PageError) as e:
            logpage.read_page(path, cursor, 10, None)
        assert e.value.status == status and text in str(e.value)
    for query, text in (({"cursor": "-1"}, "log.cursor:"), ({"limit": "0"}, "log.limit: expected 1-10000"),
                        ({"since": "nan"}, "log.since:"), ({"from": "0"}, "log: unknown parameter 'from'")):
        with pytest.raises(logpage.PageError, match=text):
            logpage.parse_query(query)
    assert logpage.parse_query({"cursor": "9", "limit": "5", "since": "1.5"}) == (9, 5, 1.5)


def test_page_caps(tmp_path):
    line = json.dumps({"request_id": "x" * (300 << 10), "t_arrival": 1}) + "\n"
    path = _write(tmp_path, line * 5)
    page = logpage.read_page(path, 0, 100, None)
    assert len(page["lines"]) == 3 and page["more"] and page["next_cursor"] == 3 * len(line)
    huge = _write(tmp_path, "{}\n" + "y" * (logpage.PAGE_MAX_BYTES + 5) + "\n")
    assert logpage.read_page(huge, 0, 100, None)["next_cursor"] == 3
    with pytest.raises(logpage.PageError, match="the line at cursor 3 is over"):
        logpage.read_page(huge, 3, 100, None)


def test_the_simulator_serves_its_log(sim):
    for i in range(3):
        st, _, _ = sim.request("POST", "/v1/completions", {"model": "sim-model", "prompt": "hi", "max_tokens": 2},
                               headers={"x-request-id": f"page-{i}"})
        assert st == 200
    assert wait_for(lambda: sim.log_path.read_text().count("page-") >= 3, 5)
    ids, cursor = [], 0
    for _ in range(10):
        st, page = sim.admin("GET", f"/admin/log?cursor={cursor}&limit=1")
        assert st == 200 and isinstance(page["name"], str), page
        ids += [json.loads(x)["request_id"] for x in page["lines"]]
        cursor = page["next_cursor"]
        if not page["more"]:
            break
    assert [i for i in ids if i.startswith("page-")] == ["page-0", "page-1", "page-2"]
    assert cursor == sim.log_path.stat().st_size
    st, body, _ = sim.request("GET", "/admin/log")
    assert st == 401 and b"lines" not in body
    st, err = sim.admin("GET", "/admin/log?cursor=1")
    assert st == 400 and "cursor 1 is not at the start of a line" in err["error"]


def test_no_request_log_is_an_error(sim_factory):
    s = sim_factory("--profile", "instant")
    st, err = s.admin("GET", "/admin/log")
    assert st == 404 and err == {"error": "no request log: this simulator was started without --request-log"}
