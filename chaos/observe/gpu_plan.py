"""Which source reads which GPU: every target's devices (from the file: `gpus:` as a list or the
env's CUDA_VISIBLE_DEVICES; or as read from its container), each read where it lives: NVML when the
harness runs on the target's host, else that host's dcgm-exporter (`telemetry.dcgm[host]`, else
`telemetry.dcgm_url`). No target naming its GPUs: the one-GPU form (`telemetry.gpu_index`)."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from chaos.observe.gpu import GpuChannel, GpuObserver
from chaos.observe.gpu_sources import DcgmPage, DcgmSource, GpuSource, GpuUnavailable, NvmlSource

if TYPE_CHECKING:
    from chaos.env.model import Environment, Target
    from chaos.observe.timeline import Timeline

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def on_this_host(target: Target) -> bool:
    """Whether the target's GPUs are this machine's (NVML here sees them)."""
    engine = target.docker_host or ""
    return target.host in LOCAL_HOSTS and (not engine or engine.startswith("unix://"))


def _nvml(device: str) -> GpuSource | None:
    try:
        return NvmlSource(device)
    except (GpuUnavailable, ImportError):
        return None


def plan_channels(env: Environment, from_containers: Mapping[str, list[str]] | None = None,
                  nvml: Callable[[str], GpuSource | None] = _nvml) -> tuple[list[GpuChannel], list[str]]:
    """The GPUs to watch and, for each target or GPU that cannot be watched, one line saying why."""
    tel, pages, channels, notes = env.telemetry, {}, [], []

    def exporter(host: str) -> DcgmPage | None:
        url = tel.dcgm.get(host) or tel.dcgm_url
        if url and url not in pages:
            pages[url] = DcgmPage(url, shared=True)  # one scrape per poll for all its GPUs
        return pages.get(url) if url else None

    named = {t.name: t.gpu_devices or (from_containers or {}).get(t.name) for t in env.targets}
    if not any(named.values()):  # the one-GPU form: NVML unless every target is on another host
        remote = bool(env.targets) and not any(on_this_host(t) for t in env.targets)
        dev = str(tel.gpu_index)
        src = None if remote else nvml(dev)  # this host's GPU is not a remote target's
        page = exporter("") if src is None else None
        if page is not None:
            src = DcgmSource(page, gpu=dev)
        why = ("the targets run on other hosts and telemetry names no dcgm-exporter (dcgm_url)" if remote
               else "no NVML GPU and no DCGM exporter")
        return ([GpuChannel("", dev, src)] if src else []), ([] if src else [why])
    for t in env.targets:
        devices = named[t.name]
        if not devices:
            notes.append(f"{t.name}: its GPUs are not named (gpus: a list, CUDA_VISIBLE_DEVICES in env, or its "
                         "container's device request)")
            continue
        local = on_this_host(t)
        for dev in devices:
            src = nvml(dev) if local else None
            page = exporter(t.host) if src is None else None
            if src is None and page is None:
                where = "NVML failed here" if local else f"{t.host} is another host"
                notes.append(f"{t.name}/gpu {dev}: {where} and no dcgm-exporter for it (telemetry.dcgm)")
                continue
            channels.append(GpuChannel(t.name, dev, src or DcgmSource(page or "", gpu=dev)))
    return channels, notes


def devices_from_container(facts: Any) -> list[str] | None:
    """The GPUs a container was given, from what `docker inspect` said of it (the `gpus` device request
    "device=2,3", else NVIDIA_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES as indices or UUIDs); None for a
    count, "all" or nothing: which devices Docker picked is not in the inspect output."""
    if facts is None:
        return None
    req = str(getattr(facts, "gpus", None) or "")
    variables = getattr(facts, "variables", None) or {}
    for text in (req[len("device="):] if req.startswith("device=") else "",
                 variables.get("NVIDIA_VISIBLE_DEVICES", ""), variables.get("CUDA_VISIBLE_DEVICES", "")):
        devices = [d.strip() for d in str(text).split(",") if d.strip()]
        if devices and all(d.isdigit() or d.startswith(("GPU-", "MIG-")) for d in devices):
            return devices
    return None


def observer_for(env: Environment, timeline: Timeline,
                 from_containers: Mapping[str, list[str]] | None = None) -> GpuObserver:
    """A GpuObserver over every GPU of every target of `env` (idle, saying why, when none is seen);
    devices the file does not name are taken from each container as read this session, if it was."""
    if from_containers is None:
        read = {t.name: devices_from_container(getattr(t, "read_from_container", None)) for t in env.targets}
        from_containers = {k: v for k, v in read.items() if v}
    channels, notes = plan_channels(env, from_containers)
    obs = GpuObserver(timeline, channels=channels, unavailable="; ".join(notes) or "no GPU named")
    for n in notes if channels else []:
        timeline.event("observer", "gpu_not_watched", reason=n)
    return obs
