"""`chaos env check --probe` for GPU telemetry: each dcgm-exporter the file names serves DCGM series,
and every GPU a target on that host names (`gpus:` list or CUDA_VISIBLE_DEVICES) is on its page."""
from __future__ import annotations

from chaos.env import Environment
from chaos.env_check.http import Probe, check_dcgm, get
from chaos.observe.gpu_plan import on_this_host


def _devices_on(body: bytes) -> set[str]:
    """Every `gpu` and `UUID` label value on an exporter page."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        fams = list(text_string_to_metric_families(body.decode("utf-8", "replace")))
    except ValueError:
        return set()
    return {s.labels[k] for f in fams for s in f.samples for k in ("gpu", "UUID") if k in s.labels}


def check_gpu_telemetry(env: Environment, timeout: float) -> list[Probe]:
    """One line per exporter: `dcgm exporter` for telemetry.dcgm_url, `dcgm exporter <host>` per entry
    of telemetry.dcgm; a named GPU of a remote target missing from its host's page fails the line."""
    tel = env.telemetry
    urls: list[tuple[str, str | None, str]] = [("dcgm exporter", None, tel.dcgm_url)] if tel.dcgm_url else []
    urls += [(f"dcgm exporter {host}", host, url) for host, url in tel.dcgm.items()]
    out: list[Probe] = []
    for what, host, url in urls:
        line = check_dcgm(url, timeout)
        wanted = [(t.name, d) for t in env.targets if not on_this_host(t) and (t.gpu_devices or [])
                  and (t.host == host or (host is None and t.host not in tel.dcgm)) for d in t.gpu_devices or []]
        if not line.ok or not wanted:
            out.append(Probe(what, url, line.ok, line.detail))
            continue
        seen = _devices_on(get(url.rstrip("/") + "/metrics", timeout).body)
        missing = [f"{n}/gpu {d}" for n, d in wanted if d not in seen]
        listed = ", ".join(f"{n}/gpu {d}" for n, d in wanted)
        detail = (f"expected {', '.join(missing)} on its page (label gpu or UUID); it lists {', '.join(sorted(seen))}"
                  if missing else f"serves DCGM_FI_* series for {listed}")
        out.append(Probe(what, url, not missing, detail))
    return out
