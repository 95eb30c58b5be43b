"""The harness's locustfile; also runs on its own: `locust -f chaos/load/locustfile.py --host URL`.

Configuration comes from the environment (see chaos.load.config): CHAOS_LOAD_CONFIG names a JSON
file of LoadConfig fields; CHAOS_LOAD_<FIELD> overrides one field. Each process (a local run, or
each worker in distributed mode) appends its records to `<out_dir>/records-<host>-<pid>.jsonl`
and, when its users stop, `meta-<host>-<pid>.json` (its CPU and wall seconds).

The configured shape (users | rate | ramp | step, for `duration_s`) drives the run, so a plain
`locust -f ... --headless --host URL` drives 8 users for 30 s and stops. Set
CHAOS_LOAD_SHAPE_CLASS=0 (users shape only) to drive it with Locust's own -u/-r/-t or web UI.
Distributed over hosts: start `--master` with the config, then on each host
`locust -f chaos/load/locustfile.py --worker --master-host H` with the same CHAOS_LOAD_CONFIG
(set `workers` to the number of workers, which share `rate_per_s`); collect every host's out_dir
and merge with `chaos.load.read_dir`.
"""
from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run by path: make `chaos` importable from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import gevent
from locust import events
from locust.env import Environment
from locust.rpc import Message
from locust.runners import LocalRunner, MasterRunner, WorkerRunner

from chaos.errors import ConfigError
from chaos.load import kstamp, shapes
from chaos.load import users as _users
from chaos.load.config import LoadConfig, from_environ
from chaos.load.context import EXHAUSTED, Context

try:
    CONFIG = from_environ()
except ConfigError as _e:  # one clear line, not a traceback, when run on its own
    sys.stderr.write(f"chaos locustfile: error: {_e}\n")
    sys.exit(2)


class ChatOrCompletionUser(_users.LLMUser):
    """Chat or completions, per the configuration's `api`."""

    abstract = False
    network_timeout = CONFIG.timeout_s
    connection_timeout = CONFIG.timeout_s
    concurrency = 1


def _rate_users(cfg: LoadConfig) -> int:
    return cfg.max_users or max(8, int(cfg.rate_per_s * 2) + 4)


if CONFIG.shape == "ramp":
    class ConfiguredShape(shapes.RampShape):
        """Ramp from the configuration."""

        start_users, end_users, duration_s = CONFIG.ramp_from, CONFIG.users, CONFIG.duration_s
elif CONFIG.shape == "step":
    class ConfiguredShape(shapes.StepShape):  # type: ignore[no-redef]
        """Steps from the configuration."""

        step_users, step_s, max_users, duration_s = CONFIG.step_users, CONFIG.step_s, CONFIG.users, CONFIG.duration_s
elif os.environ.get("CHAOS_LOAD_SHAPE_CLASS", "1") == "1":
    class ConfiguredShape(shapes.FixedShape):  # type: ignore[no-redef]
        """Fixed users (or the rate shape's concurrency cap) for the configured duration."""

        users = _rate_users(CONFIG) if CONFIG.shape == "rate" else CONFIG.users
        duration_s = CONFIG.duration_s


_ctx: Context | None = None


def _master_ends_a_finite_run(runner: MasterRunner) -> None:
    done: set[int] = set()

    def on_exhausted(environment: Environment, msg: Message, **_kw: Any) -> None:
        done.add(int(msg.data))
        # every worker has users (the runner starts no more workers than users), so each will report
        if len(done) >= max(1, CONFIG.workers):
            gevent.spawn_later(0.05, runner.quit)

    runner.register_message(EXHAUSTED, on_exhausted)


@events.init.add_listener  # type: ignore[untyped-decorator]  # untyped in locust
def _on_init(environment: Environment, **_kw: Any) -> None:
    global _ctx
    if isinstance(environment.runner, MasterRunner):
        _master_ends_a_finite_run(environment.runner)
    if isinstance(environment.runner, (LocalRunner, WorkerRunner)) or environment.runner is None:
        _ctx = Context(CONFIG)
        _ctx.environment = environment
        _users.LLMUser.ctx = _ctx
        kstamp.install()  # time stream events by the kernel's receive stamps (chaos.load.kstamp)


@events.quitting.add_listener  # type: ignore[untyped-decorator]  # untyped in locust
def _on_quit(environment: Environment, **_kw: Any) -> None:
    if _ctx is not None:
        # on SIGTERM locust fires `quitting` before it stops the users: stop them first, so that a
        # request cut short in its backoff wait still writes its final ("abandoned") record
        runner = getattr(environment, "runner", None)
        if runner is not None and runner.user_count:
            runner.stop()
        _ctx.close()


# Young-generation collections every GC_GEN0 container allocations instead of CPython's 700. The
# load process allocates a few dozen short-lived containers per request (most freed by refcount),
# and at 700 the collector ran about 40 times a second with every 100th pass a full one over the
# whole Locust/gevent heap; on a loaded host that was ~25 us of a ~300 us request (bench/loadgen.py).
GC_GEN0 = 10_000


def _quiet_gc() -> None:
    """Move what start-up built (modules, Locust, gevent, the workload) out of the collector's way
    (gc.freeze: never scanned again) and collect the young generation less often: the load
    process's garbage is almost all freed by refcount, so a pass mostly rescans live objects.
    Cycles are still collected, only later."""
    gc.collect()
    gc.freeze()
    _g0, g1, g2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0, g1, g2)


@events.test_start.add_listener  # type: ignore[untyped-decorator]  # untyped in locust
def _on_start(environment: Environment, **_kw: Any) -> None:
    if _ctx is not None and _ctx._t_start is None:
        _quiet_gc()
        _ctx.mark_start()


@events.test_stop.add_listener  # type: ignore[untyped-decorator]  # untyped in locust
def _on_stop(environment: Environment, **_kw: Any) -> None:
    if _ctx is not None:
        _ctx.flush()
        _ctx.write_meta()
