"""pytest plugin: `--env` and friends, markers, the loaded Environment in config.stash, safety.

Settings resolve marker -> CLI -> environment variable -> ini, like pytest-timeout and xdist.
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from chaos.env import Environment
from chaos.env import load as load_env
from chaos.errors import ChaosError

ENV_KEY = pytest.StashKey[Environment]()
UNINSTALL_SIGNALS_KEY = pytest.StashKey[object]()
ENV_NAME_KEY = pytest.StashKey[str]()
GPU_KEY = pytest.StashKey[str]()
READ_KEY = pytest.StashKey[bool]()

# the release checklist and --require-proven; the suite fixtures (stack, run_experiment, summary, extra_gateway)
pytest_plugins = ["chaos.fixtures.checklist", "chaos.fixtures.stack", "chaos.fixtures.experiment", "chaos.fixtures.report",
                  "chaos.fixtures.gateway", "chaos.fixtures.toxiproxy", "chaos.fixtures.monitoring"]

MARKERS = {
    "destructive": "hurts the target (restart, kill, freeze); refused on protected environments",
    "docker": "needs a Docker engine",
    "gpu": "needs an NVIDIA GPU with NVML",
    "slow": "takes more than about ten seconds",
    "proves": "proves(item-id, ..., part=''): the release-checklist items this scenario proves "
              "(chaos.report.checklist)",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chaos", "llm-chaos resilience harness")
    group.addoption("--env", dest="chaos_env", default=None,
                    help="environment name from environments/ or a path to a YAML file "
                         "(default: $CHAOS_ENV, ini chaos_env, else 'local')")
    group.addoption("--allow-destructive", dest="chaos_allow_destructive", action="store_true", default=None,
                    help="allow destructive tests against an environment marked protected: true")
    group.addoption("--chaos-no-cleanup", dest="chaos_no_cleanup", action="store_true", default=None,
                    help="do not revert leftover faults from the ledger at session start and end")
    group.addoption("--target", dest="chaos_targets", action="append", default=None, metavar="NAME",
                    help="the recovery suite hurts this target (repeatable; default: every target the "
                         "environment marks: a stable one, or hurt: (README, Pointing it at your own staging))")
    parser.addini("chaos_env", "default environment name or path", default="local")
    parser.addini("chaos_allow_destructive", "allow destructive tests on protected environments",
                  type="bool", default=False)
    parser.addini("chaos_no_cleanup", "skip ledger cleanup at session start and end", type="bool", default=False)


def _setting(config: pytest.Config, name: str, env_var: str) -> object:
    cli = config.getoption(name)
    if cli is not None:
        return cli
    if os.environ.get(env_var):
        value = os.environ[env_var]
        return value if name == "chaos_env" else value.lower() in ("1", "true", "yes")
    return config.getini(name)


def env_name(config: pytest.Config) -> str:
    """The environment name or path this session runs against."""
    return str(_setting(config, "chaos_env", "CHAOS_ENV"))


def allow_destructive(config: pytest.Config) -> bool:
    return bool(_setting(config, "chaos_allow_destructive", "CHAOS_ALLOW_DESTRUCTIVE"))


def chosen_targets(config: pytest.Config) -> tuple[str, ...]:
    """The --target names given (empty: the environment's marks decide)."""
    return tuple(config.getoption("chaos_targets", None) or ())


def read_containers(config: pytest.Config) -> None:
    """Once per session, before the recovery suite picks its targets: what each existing container of an
    environment the harness does not start says about itself (TP size, engine timeout; chaos env check
    shows the same). A container that cannot be read leaves the file's values."""
    env = get_env(config)
    if READ_KEY in config.stash or env.embedded != "none":
        return
    from chaos.targets.container_facts import read_all

    config.stash[READ_KEY] = True
    read_all(env.targets)


def hurt_params(config: pytest.Config, rows: Sequence[tuple[str | None, str]],
                marks: dict[str, list[pytest.MarkDecorator]] | None = None) -> list[Any]:
    """pytest params (fault, load, target) for each (fault, load) row and each target its fault hurts
    (chaos/env/hurt.py), the target in the id; a row no target fits is one param that skips saying why."""
    from chaos.env import hurt

    env = get_env(config)
    read_containers(config)
    try:
        cells = hurt.matrix(env, rows, chosen_targets(config))
    except ChaosError as e:
        raise pytest.UsageError(str(e)) from None
    out = []
    for fault, load, target, why in cells:
        m = list((marks or {}).get(fault or "", []))
        if target is None:
            m.append(pytest.mark.skip(reason=why))
        out.append(pytest.param(fault, load, target, marks=m,
                                id="-".join(p for p in (fault or "baseline", load, target) if p)))
    return out


def get_env(config: pytest.Config) -> Environment:
    """The loaded Environment; loaded once per session, errors as one clear line."""
    if ENV_KEY not in config.stash:
        try:
            config.stash[ENV_KEY] = load_env(env_name(config))
        except ChaosError as e:
            raise pytest.UsageError(str(e)) from None
    return config.stash[ENV_KEY]


def _explicit_env(config: pytest.Config) -> bool:
    return config.getoption("chaos_env") is not None or bool(os.environ.get("CHAOS_ENV"))


def pytest_configure(config: pytest.Config) -> None:
    for name, doc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")
    config.stash[ENV_NAME_KEY] = env_name(config)
    if _explicit_env(config) or chosen_targets(config):
        env = get_env(config)  # fail fast on a bad --env (or --target) before collecting anything
        from chaos.env.hurt import check_names

        try:
            check_names(env, chosen_targets(config))
        except ChaosError as e:
            raise pytest.UsageError(str(e)) from None
    from chaos.faults import interrupt

    config.stash[UNINSTALL_SIGNALS_KEY] = interrupt.install()  # SIGTERM/SIGHUP unwind like Ctrl-C


def pytest_unconfigure(config: pytest.Config) -> None:
    uninstall = config.stash.get(UNINSTALL_SIGNALS_KEY, None)
    if callable(uninstall):
        uninstall()


def pytest_report_header(config: pytest.Config) -> str | None:
    if ENV_KEY in config.stash:
        env = config.stash[ENV_KEY]
        prot = " (protected)" if env.safety.protected else ""
        return f"llm-chaos: env {env.name}{prot}, api {env.endpoints.api}"
    return None


def _cleanup(config: pytest.Config, when: str) -> None:
    if ENV_KEY not in config.stash or _setting(config, "chaos_no_cleanup", "CHAOS_NO_CLEANUP"):
        return
    try:
        from chaos.faults.ledger import cleanup
    except ImportError:
        return
    undone = cleanup(config.stash[ENV_KEY])
    if undone:
        tr = config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line(f"llm-chaos: {when}: reverted {len(undone)} leftover fault(s): " + "; ".join(undone))


def pytest_sessionstart(session: pytest.Session) -> None:
    _cleanup(session.config, "session start")


def pytest_sessionfinish(session: pytest.Session) -> None:
    _cleanup(session.config, "session end")


def pytest_collection_finish(session: pytest.Session) -> None:
    """A run of the suites opens with the plan `chaos env check` prints: what runs, skips, is refused."""
    if not any("suites" in item.path.parts for item in session.items):
        return
    from chaos.experiment.suite_plan import format_plan, plan

    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if tr is None:
        return
    env = get_env(session.config)
    tr.section(f"llm-chaos plan for {env.name}", sep="-")
    for line in format_plan(plan(env, allow_destructive=allow_destructive(session.config),
                                 only=chosen_targets(session.config))):
        tr.write_line(line)


def _suite_ceilings(config: pytest.Config, items: list[pytest.Item]) -> None:
    """pytest-timeout for each suite test (under suites/, or on the stack) from its environment
    (chaos/experiment/suite_budgets.py): above its scenario's budget, which names the phase that overran first. No
    global ceiling (the ini's) cuts a suite; a --timeout given on the command line still does."""
    if not config.pluginmanager.hasplugin("timeout") or config.getoption("timeout", None) is not None:
        return
    from chaos.experiment import suite_budgets as budgets

    suite_items = [i for i in items if i.get_closest_marker("timeout") is None
                   and ("stack" in getattr(i, "fixturenames", ()) or budgets.suite_of(i.path.parts) is not None)]
    if not suite_items:
        return
    env = get_env(config)
    for item in suite_items:
        item.add_marker(pytest.mark.timeout(budgets.item_ceiling_s(env, budgets.suite_of(item.path.parts))))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Last, after -k/-m have deselected: a marker is a keyword, and `-k 'not timeout'` (meant for the
    # network suite's timeout tests) would otherwise deselect every suite test the ceiling marks.
    _suite_ceilings(config, items)
    destructive = [i for i in items if i.get_closest_marker("destructive")]
    if not destructive or allow_destructive(config):
        return
    env = get_env(config) if _explicit_env(config) or ENV_KEY in config.stash else None
    if env is None or not env.safety.protected:
        return
    reason = (f"refused: destructive test against protected environment {env.name!r} "
              f"(pass --allow-destructive to run it)")
    for item in destructive:
        item.add_marker(pytest.mark.skip(reason=reason))


def _gpu_missing() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            count = pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception as e:  # NVMLError_LibraryNotFound / DriverNotLoaded: no GPU here
        return f"no NVIDIA GPU reachable through NVML ({type(e).__name__})"
    return None if count else "NVML found no GPU"


def require_component(component: str, reason: str | None, *, also: tuple[str, ...] = ()) -> None:
    """Skip when a component is missing (reason given); fail instead when $CHAOS_REQUIRE names it
    (or one of `also`). The one rule for docker, toxiproxy, gpu, chromium, allure and images."""
    if reason is None:
        return
    required = {c.strip() for c in os.environ.get("CHAOS_REQUIRE", "").split(",") if c.strip()}
    if required & {component, *also}:
        pytest.fail(f"{component} required by CHAOS_REQUIRE but unavailable: {reason}", pytrace=False)
    pytest.skip(f"{component} unavailable: {reason}")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("gpu") is None:
        return
    if GPU_KEY not in item.config.stash:
        item.config.stash[GPU_KEY] = _gpu_missing() or ""
    require_component("gpu", item.config.stash[GPU_KEY] or None)


@pytest.fixture(scope="session")
def chaos_env(pytestconfig: pytest.Config) -> Environment:
    """The Environment this session runs against (--env)."""
    return get_env(pytestconfig)


@pytest.fixture(scope="session")
def chaos_allow_destructive(pytestconfig: pytest.Config) -> Iterator[bool]:
    """Whether destructive faults may touch a protected environment in this session."""
    yield allow_destructive(pytestconfig)
