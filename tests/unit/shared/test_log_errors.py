"""The last error line of a log (chaos.shared.log_errors): vLLM-shaped tracebacks, a Go panic, a plain ERROR line, nothing."""
from __future__ import annotations

from chaos.shared.log_errors import MAX_CHARS, last_error_line

# vLLM's engine core dies at its first step: its traceback, then the API server's own, which points back up
VLLM_STEP_DEATH = """\
INFO 12-06 13:20:01 [api_server.py:1880] Starting vLLM API server 0 on http://127.0.0.1:19000
INFO:     127.0.0.1:50122 - "GET /health HTTP/1.1" 200 OK
(EngineCore_DP0 pid=4121) ERROR 12-06 13:20:05 [core.py:710] EngineCore encountered a fatal error.
(EngineCore_DP0 pid=4121) Traceback (most recent call last):
(EngineCore_DP0 pid=4121)   File "/opt/vllm/vllm/v1/engine/core.py", line 701, in run_engine_core
(EngineCore_DP0 pid=4121)     engine_core.run_busy_loop()
(EngineCore_DP0 pid=4121)   File "/opt/vllm/vllm/v1/attention/backends/cpu_attn.py", line 88, in forward
(EngineCore_DP0 pid=4121)     raise RuntimeError(f"Unsupported CPU attention configuration: {cfg}")
(EngineCore_DP0 pid=4121) RuntimeError: Unsupported CPU attention configuration: head_dim=64 isa=0
ERROR 12-06 13:20:05 [async_llm.py:480] AsyncLLM output_handler failed.
Traceback (most recent call last):
  File "/opt/vllm/vllm/v1/engine/async_llm.py", line 439, in output_handler
    outputs = await engine_core.get_output_async()
vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
ERROR 12-06 13:20:05 [core_client.py:564] Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.
INFO:     Shutting down
INFO 12-06 13:20:07 [launcher.py:101] Shutting down FastAPI HTTP server.
"""

# the same log after the supervisor restarted the replica: the new run's start-up lines follow the death
RESTARTED = VLLM_STEP_DEATH + "\n".join(
    f"INFO 12-06 13:20:{10 + i:02d} [loader.py:{i}] loading weights shard {i}" for i in range(40)) + "\n"

VLLM_START_FAILURE = """\
(EngineCore_DP0 pid=77) ERROR 12-06 10:00:01 [core.py:708] EngineCore failed to start.
(EngineCore_DP0 pid=77) Traceback (most recent call last):
(EngineCore_DP0 pid=77)   File "/opt/vllm/vllm/v1/worker/cpu_worker.py", line 60, in init_device
(EngineCore_DP0 pid=77)     torch.ops._C_utils.init_cpu_threads_env(self.local_omp_cpuid)
(EngineCore_DP0 pid=77) torch.OutOfMemoryError: CPU KV cache of 40 GiB does not fit in 31 GiB free
Traceback (most recent call last):
  File "/opt/vllm/bin/vllm", line 8, in <module>
    sys.exit(main())
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""

GO_PANIC = """\
2026/12/06 13:00:00 chaos-faultproxy listening on 127.0.0.1:19100
panic: runtime error: invalid memory address or nil pointer dereference
[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x6b2f1d]

goroutine 1 [running]:
main.(*Proxy).serve(0x0)
\t/src/proxy.go:112 +0x1d
main.main()
\t/src/main.go:40 +0x2a5
exit status 2
"""

PLAIN_ERROR = """\
level=info msg="starting gateway"
2026-12-06T13:00:00Z ERROR upstream pool "stable" is empty: no replica configured
level=info msg="retrying in 1s"
"""


def test_vllm_step_death_quotes_the_root_cause_not_the_pointer() -> None:
    assert last_error_line(VLLM_STEP_DEATH) == ("(EngineCore_DP0 pid=4121) RuntimeError: Unsupported CPU attention "
                                                 "configuration: head_dim=64 isa=0")


def test_a_restarted_replicas_start_up_lines_do_not_hide_its_death() -> None:
    assert last_error_line(RESTARTED) is not None
    assert "RuntimeError: Unsupported CPU attention configuration" in (last_error_line(RESTARTED) or "")


def test_vllm_start_failure_names_the_engine_cores_exception() -> None:
    assert last_error_line(VLLM_START_FAILURE) == ("(EngineCore_DP0 pid=77) torch.OutOfMemoryError: CPU KV cache of "
                                                    "40 GiB does not fit in 31 GiB free")


def test_go_panic() -> None:
    assert last_error_line(GO_PANIC) == "panic: runtime error: invalid memory address or nil pointer dereference"


def test_plain_error_line() -> None:
    assert last_error_line(PLAIN_ERROR) == '2026-12-06T13:00:00Z ERROR upstream pool "stable" is empty: no replica configured'


def test_logfmt_and_json_levels() -> None:
    assert last_error_line('level=info msg=ok\nlevel=error msg="bind: address in use"\n') == \
        'level=error msg="bind: address in use"'
    assert last_error_line('{"level": "error", "msg": "no model"}\n{"level": "info"}') == '{"level": "error", "msg": "no model"}'


def test_nothing_found() -> None:
    assert last_error_line("") is None
    assert last_error_line("INFO starting\nINFO 12-06 10:00:00 [x.py:1] ready\nan error-free line about errors\n") is None


def test_an_old_runs_exception_loses_to_the_newest_failure() -> None:
    old = "Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: yesterday's failure\n"
    new = "\n".join(f"INFO line {i}" for i in range(30)) + "\nERROR 12-06 10:00:00 [gw.py:3] port 19000 is in use\n"
    assert last_error_line(old + new) == "ERROR 12-06 10:00:00 [gw.py:3] port 19000 is in use"


def test_a_pointer_alone_is_still_quoted() -> None:
    only = "RuntimeError: Engine core initialization failed. See root cause above.\n"
    assert last_error_line(only) == only.strip()


def test_chained_traceback_quotes_the_last_exception() -> None:
    text = ("Traceback (most recent call last):\n  File \"a.py\", line 1, in f\nKeyError: 'x'\n\n"
            "During handling of the above exception, another exception occurred:\n\n"
            "Traceback (most recent call last):\n  File \"a.py\", line 3, in g\nConfigLoadFailure: no config at /etc/x\n")
    assert last_error_line(text) == "ConfigLoadFailure: no config at /etc/x"


def test_colour_codes_are_dropped_and_long_lines_cut() -> None:
    assert last_error_line("\x1b[31mERROR\x1b[0m disk full\n") == "ERROR disk full"
    long = last_error_line("RuntimeError: " + "x" * 1000)
    assert long is not None and len(long) == MAX_CHARS and long.endswith("…")
