"""What a running container already says about itself (`docker inspect`): its engine timeouts and other
`VLLM_*` settings, restart policy, GPU devices and tensor-parallel size.

The file may override each one; `settings()` says, per setting, the file's value, the container's, and
which one the harness uses (and why), so `chaos env check` and the run agree. Values of variables that
may be secrets (a key, a token) are never kept: only their names.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, get_args

from chaos.env.model import RestartPolicy, Target

EXECUTE_TIMEOUT_VAR = "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"  # a frozen TP rank kills the engine after this
EXECUTE_TIMEOUT_DEFAULT_S = 300.0  # vLLM's default for it
# shown besides the VLLM_* ones: which GPUs the processes inside see
GPU_VARS = ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.I)
_TP_FLAG = re.compile(r"^(?:--tensor-parallel-size|-tp)(?:=(\d+))?$")


@dataclass(frozen=True)
class ContainerFacts:
    """The parts of one container's `docker inspect` the harness uses."""

    container: str
    engine: str
    status: str
    image: str
    restart_policy: str  # Docker's name: always, unless-stopped, on-failure, no
    max_retries: int
    variables: dict[str, str] = field(default_factory=dict)  # VLLM_* and GPU_VARS; secret-looking ones "(set)"
    gpus: str | None = None  # "all", "N" (a count) or "device=2,3" from the device request; None: none
    tp_size: int | None = None  # from --tensor-parallel-size / -tp in the command line
    cpus: float | None = None  # its CPU limit in cores (`--cpus`, or `--cpu-quota` / `--cpu-period`); None: none
    cpuset: str | None = None  # the cores it may run on (`--cpuset-cpus`); None: any

    @property
    def execute_model_timeout_s(self) -> float | None:
        raw = self.variables.get(EXECUTE_TIMEOUT_VAR)
        try:
            return float(raw) if raw is not None else None
        except ValueError:
            return None


def _tp(args: list[str]) -> int | None:
    for i, a in enumerate(args):
        m = _TP_FLAG.match(a)
        if not m:
            continue
        raw = m.group(1) if m.group(1) is not None else (args[i + 1] if i + 1 < len(args) else "")
        return int(raw) if raw.isdigit() else None
    return None


def _gpus(host_config: dict[str, Any]) -> str | None:
    for req in host_config.get("DeviceRequests") or []:
        if ["gpu"] not in (req.get("Capabilities") or []) and req.get("Driver") != "nvidia":
            continue
        if req.get("DeviceIDs"):
            return "device=" + ",".join(str(d) for d in req["DeviceIDs"])
        count = int(req.get("Count") or 0)
        return "all" if count < 0 else str(count) if count else None
    return None


def _cpus(host_config: dict[str, Any]) -> float | None:
    nano = int(host_config.get("NanoCpus") or 0)
    quota, period = int(host_config.get("CpuQuota") or 0), int(host_config.get("CpuPeriod") or 0)
    if nano > 0:
        return nano / 1e9
    return quota / (period or 100_000) if quota > 0 else None  # Docker's default period is 100 ms


def parse(attrs: dict[str, Any], engine: str = "local") -> ContainerFacts:
    """The facts in one container's `docker inspect` object (the SDK's `container.attrs`)."""
    config, host = attrs.get("Config") or {}, attrs.get("HostConfig") or {}
    variables: dict[str, str] = {}
    for item in config.get("Env") or []:
        name, _, value = str(item).partition("=")
        if name.startswith("VLLM_") or name in GPU_VARS:
            variables[name] = "(set)" if _SECRET.search(name) else value
    policy = host.get("RestartPolicy") or {}
    args = [str(a) for a in (config.get("Entrypoint") or []) + (config.get("Cmd") or [])]
    return ContainerFacts(container=str(attrs.get("Name", "")).lstrip("/"), engine=engine,
                          status=str((attrs.get("State") or {}).get("Status", "?")), image=str(config.get("Image", "")),
                          restart_policy=policy.get("Name") or "no", max_retries=int(policy.get("MaximumRetryCount") or 0),
                          variables=dict(sorted(variables.items())), gpus=_gpus(host), tp_size=_tp(args),
                          cpus=_cpus(host), cpuset=host.get("CpusetCpus") or None)


@dataclass(frozen=True)
class Setting:
    """One setting: what the file says, what the container says, and which the harness uses."""

    name: str
    file: str | None
    container: str | None
    used: str
    source: str  # "file", "container" or "default"

    def line(self) -> str:
        parts = [f"file {self.file}" if self.file is not None else "file: not set",
                 f"container {self.container}" if self.container is not None else "container: not set"]
        differ = self.file is not None and self.container is not None and self.file != self.container
        note = " (the file overrides the container's)" if differ and self.source == "file" else ""
        return f"{self.name}: {self.used} from the {self.source}{note} [{', '.join(parts)}]"


def _choose(name: str, file: str | None, container: str | None, default: str) -> Setting:
    if file is not None:
        return Setting(name, file, container, file, "file")
    if container is not None:
        return Setting(name, file, container, container, "container")
    return Setting(name, file, container, default, "default")


def settings(cfg: Target, facts: ContainerFacts | None) -> list[Setting]:
    """The settings the harness takes from a target's file entry or its container: the file wins where
    it sets a value (an override), else the container's, else the default."""
    given = cfg.file_fields
    timeout_file = f"{cfg.vllm.execute_model_timeout_s:g}" if cfg.vllm and cfg.vllm.execute_model_timeout_s else None
    timeout_ct = facts.execute_model_timeout_s if facts else None
    policy_ct = (facts.restart_policy + (f":{facts.max_retries}" if facts.max_retries else "")) if facts else None
    out = [
        _choose(f"engine timeout ({EXECUTE_TIMEOUT_VAR})", timeout_file,
                f"{timeout_ct:g}" if timeout_ct is not None else None, f"{EXECUTE_TIMEOUT_DEFAULT_S:g}"),
        _choose("restart policy", cfg.restart_policy if "restart_policy" in given else None, policy_ct,
                cfg.restart_policy),
        _choose("tensor-parallel size", str(cfg.tp_size) if "tp_size" in given else None,
                str(facts.tp_size) if facts and facts.tp_size else None, str(cfg.tp_size)),
        _choose("GPUs", _gpus_text(cfg.gpus) if "gpus" in given else None, facts.gpus if facts else None,
                _gpus_text(cfg.gpus)),
    ]
    if cfg.simulator:  # the simulator's own rank timeout is a flag the harness passes: the file's
        out[0] = Setting("engine timeout (simulator collective_timeout_s)", f"{cfg.simulator.collective_timeout_s:g}",
                         None, f"{cfg.simulator.collective_timeout_s:g}", "file")
    return out


def _gpus_text(gpus: object) -> str:
    """The file's `gpus` as the container's are shown: a device list (main's i30-gpu form) as "device=0,1"."""
    return "device=" + ",".join(str(d) for d in gpus) if isinstance(gpus, (list, tuple)) else str(gpus)


def facts_of(cfg: Target) -> ContainerFacts | None:
    """What was read from the target's container this session (None: not read)."""
    got = cfg.read_from_container
    return got if isinstance(got, ContainerFacts) else None


def apply(cfg: Target, facts: ContainerFacts) -> None:
    """Remember what the container said, and take its restart policy and TP size where the file sets
    none (the file overrides); the engine timeout is chaos.experiment.suite_budgets.engine_timeout's to choose."""
    cfg.remember_container(facts)
    given = cfg.file_fields
    if "restart_policy" not in given and facts.restart_policy in get_args(get_args(RestartPolicy)[0]):
        cfg.restart_policy = facts.restart_policy  # type: ignore[assignment]  # checked against the Literal
    if "tp_size" not in given and facts.tp_size:
        cfg.tp_size = facts.tp_size


def read(cfg: Target, client: Any) -> ContainerFacts:
    """`docker inspect` of the target's named container through `client` (a docker SDK client)."""
    c = client.containers.get(cfg.container_name)
    return parse(c.attrs, cfg.docker_host or "local")


def read_all(targets: list[Target], timeout: float = 5.0,
             client: Callable[[str | None], Any] | None = None) -> dict[str, ContainerFacts | str]:
    """Each docker target's container, read once per engine: its facts, or why it could not be read
    (then the file's values are used). A target read is also remembered on its config (facts_of)."""
    if client is None:
        from chaos.targets.docker_client import client_for

        client = client_for
    engines: dict[str | None, Any] = {}
    out: dict[str, ContainerFacts | str] = {}
    for t in targets:
        if t.kind != "docker":
            continue
        if not t.container_name:
            out[t.name] = "its container is created at run time from the file (no container_name): the file's values"
            continue
        where = t.docker_host or "local"
        if t.docker_host not in engines:
            try:
                engines[t.docker_host] = client(t.docker_host)
                engines[t.docker_host].api.timeout = timeout
            except Exception as e:  # ChaosError, or the SDK's many kinds: one line
                engines[t.docker_host] = f"engine {where} does not answer: {_first_line(e)}"
        engine = engines[t.docker_host]
        if isinstance(engine, str):
            out[t.name] = engine
            continue
        try:
            facts = read(t, engine)
        except Exception as e:
            nf = type(e).__name__ == "NotFound"
            out[t.name] = (f"no container {t.container_name!r} on {where}" + (" (not up yet?)" if nf else
                                                                                f": {_first_line(e)}"))
            continue
        apply(t, facts)
        out[t.name] = facts
    return out


def _first_line(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return text or type(e).__name__


def format_read(targets: list[Target], read_result: dict[str, ContainerFacts | str]) -> list[str]:
    """`chaos env check`'s lines: per docker target, what was read from its container and what is used."""
    out: list[str] = []
    for t in targets:
        if t.name not in read_result:
            continue
        got = read_result[t.name]
        facts = got if isinstance(got, ContainerFacts) else None
        head = (f"{t.name}: container {facts.container} on {facts.engine} ({facts.status}, image {facts.image})"
                if facts else f"{t.name}: not read: {got}")
        out.append(head)
        if facts:
            shown = ", ".join(f"{k}={v}" for k, v in facts.variables.items()) or "none"
            out.append(f"  VLLM_*/GPU variables: {shown}")
            # a capped or pinned replica steps slower than its GPUs alone would say: worth seeing beside the SLAs
            limit = f"limit {facts.cpus:g} cores" if facts.cpus else "no limit"
            out.append(f"  CPU: {limit}" + (f", cores {facts.cpuset}" if facts.cpuset else ", any core"))
        out += [f"  {s.line()}" for s in settings(t, facts)]
    return out
