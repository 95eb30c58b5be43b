"""`chaos env check --probe` for alert rules that can never fire: each alert's metrics (read from its PromQL,
through the recording rules it reads) against what the scrape targets export. An embedded Prometheus is not
running yet, so its scrape targets' own /metrics pages are read; a team's Prometheus is asked which metric
names it has series of. A rule reading a metric nobody exports is a configuration error, not a quiet alert:
its line FAILs (the shipped rules read the reference gateway's `chaos_gateway_*`, which a team's gateway
does not export; their comments name the counters each needs and vLLM's nearest equivalent)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from chaos.env_check.http import Probe, get
from chaos.env_check.promql import metric_names

# series Prometheus makes itself, for every target or rule: no page exports them
PROMETHEUS_OWN = {"up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_samples_post_metric_relabeling",
                  "scrape_series_added", "ALERTS", "ALERTS_FOR_STATE"}
# the samples a family declared by `# TYPE`/`# HELP` has (a labelled counter shows no sample before its first count)
FAMILY_SUFFIXES = ("", "_total", "_created", "_bucket", "_sum", "_count", "_info")
_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


@dataclass(frozen=True)
class Rule:
    """One alerting or recording rule: its name, the metrics its expression reads, and its file."""

    name: str
    alert: bool
    reads: tuple[str, ...]
    file: str


def read_rules(files: list[str]) -> list[Rule]:
    """Every rule of the readable files (an unreadable one is chaos.env_check.monitoring's to report)."""
    import yaml

    out = []
    for f in files:
        try:
            doc = yaml.safe_load(Path(f).read_text(encoding="utf-8"))
            for g in doc["groups"]:
                for r in g["rules"]:
                    name = r.get("alert") or r.get("record")
                    out.append(Rule(str(name), "alert" in r, tuple(metric_names(str(r["expr"]))), f))
        except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError):
            continue
    return out


def exported_names(body: bytes) -> set[str]:
    """The metric names a Prometheus text or OpenMetrics page exports: its samples and its declared families."""
    names: set[str] = set()
    for line in body.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if line.startswith(("# TYPE ", "# HELP ")):
            family = line.split()[2:3]
            names |= {family[0] + s for s in FAMILY_SUFFIXES} if family else set()
        elif line and not line.startswith("#") and (m := _NAME.match(line)):
            names.add(m.group(0))
    return names


def scrape_pages(env: Any) -> dict[str, list[str]]:
    """job -> HOST:PORT of each page the embedded Prometheus scrapes (chaos.stack.monitoring.scrape_jobs, which
    the harness does not import; a unit test holds the two equal)."""
    jobs: dict[str, list[str]] = {"vllm": [f"{t.host}:{t.port}" for t in env.targets]}
    if env.endpoints.gateway_admin:
        jobs["gateway"] = [urlsplit(str(env.endpoints.gateway_admin)).netloc]
    return jobs


def _from_pages(env: Any, timeout: float) -> tuple[set[str], list[Probe]]:
    """What the scrape targets' pages export, and a FAIL line per page that did not answer."""
    have: set[str] = set()
    failed = []
    for job, hosts in scrape_pages(env).items():
        for host in hosts:
            url = f"http://{host}/metrics"
            answer = get(url, timeout)
            if answer.status == 200:
                have |= exported_names(answer.body)
            else:
                failed.append(Probe(f"scrape target {job}", url, False, f"expected a metrics page; got {answer.got()}"))
    return have, failed


def _from_prometheus(url: str, timeout: float) -> tuple[set[str], list[Probe]]:
    """The metric names the team's Prometheus has series of (its label __name__'s values)."""
    answer = get(url.rstrip("/") + "/api/v1/label/__name__/values", timeout)
    doc = answer.json() if answer.status == 200 else None
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        return set(), [Probe("prometheus metric names", url, False,
                             f"expected the names of its series (/api/v1/label/__name__/values); got {answer.got()}")]
    return {str(n) for n in data}, []


def _needs(names: tuple[str, ...], records: dict[str, tuple[str, ...]], seen: frozenset[str] = frozenset()) -> set[str]:
    """The metrics `names` come from, a recording rule's name replaced by what its expression reads."""
    out: set[str] = set()
    for n in names:
        if n in records and n not in seen:
            out |= _needs(records[n], records, seen | {n})
        elif n not in records:
            out.add(n)
    return out


def check_rule_metrics(env: Any, timeout: float) -> list[Probe]:
    """A FAIL line per alert that reads a metric no scrape target exports, naming the rule and the metric;
    one ok line for the rest."""
    mon = env.monitoring
    rules = read_rules(mon.rule_files) if mon is not None else []
    alerts = [r for r in rules if r.alert]
    if not alerts:
        return []
    if mon.prometheus.embedded:
        have, out = _from_pages(env, timeout)
        where = "pages of " + ", ".join(f"{job} {h}" for job, hosts in scrape_pages(env).items() for h in hosts)
    else:
        have, out = _from_prometheus(str(mon.prometheus.url), timeout)
        where = f"series of Prometheus {mon.prometheus.url}"
    files = ", ".join(dict.fromkeys(r.file for r in alerts))
    if not have:
        return [*out, Probe("alert rule metrics", files, False, f"cannot tell which alerts can fire: nothing read from "
                                                                f"the {where}")]
    unread = f"; {len(out)} page(s) did not answer" if out else ""
    records = {r.name: r.reads for r in rules if not r.alert}
    fine = 0
    for r in alerts:
        missing = sorted(_needs(r.reads, records) - have - PROMETHEUS_OWN)
        if missing:
            out.append(Probe(f"alert rule {r.name}", r.file, False,
                             f"reads {', '.join(missing)}, which no scrape target exports (looked in the {where}{unread}): "
                             "it can never fire"))
        else:
            fine += 1
    if fine:
        out.append(Probe("alert rule metrics", files, True, f"{fine} of {len(alerts)} alerts read only exported metrics"))
    return out
