"""`chaos env check` for the `monitoring:` section: every rule file loads (`promtool check rules`), every
alert an expectation names is in a rule file, every alert's metrics are exported (chaos.env_check.rule_metrics),
and the Prometheus and Alertmanager answer as themselves (or, embedded, their programs are installed)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from chaos.env_check.http import Probe, get
from chaos.env_check.rule_metrics import check_rule_metrics


def rule_alerts(files: list[str]) -> tuple[set[str], list[str]]:
    """The alert names the rule files define, and one line per file that cannot be read as rules."""
    import yaml

    names: set[str] = set()
    problems: list[str] = []
    for f in files:
        try:
            doc = yaml.safe_load(Path(f).read_text(encoding="utf-8"))
            names |= {str(r["alert"]) for g in doc["groups"] for r in g["rules"] if "alert" in r}
        except (OSError, yaml.YAMLError, KeyError, TypeError) as e:
            problems.append(f"{f}: not a readable rule file ({type(e).__name__}: {str(e).splitlines()[0]})")
    return names, problems


def expectation_problems(mon: Any) -> list[str]:
    """One line per alert an expectation names that no rule file defines (and per unreadable file)."""
    names, problems = rule_alerts(mon.rule_files)
    for fault, exp in mon.expect.items():
        for field in ("fire", "allow"):
            for alert in getattr(exp, field):
                if alert not in names:
                    problems.append(f"monitoring.expect.{fault}.{field}: alert {alert!r} is in no rule file "
                                    f"(rule_files define: {', '.join(sorted(names)) or 'none'})")
    return problems


def check_rule_file(path: str, timeout: float) -> Probe:
    tool = shutil.which("promtool")
    if tool is None:
        return Probe("rule file", path, False, "promtool not found (Debian package prometheus): cannot check it loads")
    try:
        run = subprocess.run([tool, "check", "rules", path], capture_output=True, text=True, timeout=max(timeout, 10))
    except subprocess.TimeoutExpired:
        return Probe("rule file", path, False, "promtool check rules did not finish")
    out = " ".join((run.stdout + run.stderr).split())
    if run.returncode != 0:
        return Probe("rule file", path, False, f"promtool check rules failed: {out[-300:]}")
    return Probe("rule file", path, True, out.split(path)[-1].strip(" :") or "loads")


def _server(what: str, cfg: Any, component: str, health: str, timeout: float) -> Probe:
    if cfg.embedded:
        from chaos.shared.proc import find_program

        # the program a run would start (chaos/stack/monitoring.py looks the same way; the harness
        # does not import the stand-ins)
        var, name = {"prometheus": ("CHAOS_PROMETHEUS_BIN", "prometheus"),
                     "alertmanager": ("CHAOS_ALERTMANAGER_BIN", "prometheus-alertmanager")}[component]
        found = find_program(var, name, *(("alertmanager",) if component == "alertmanager" else ()))
        if found:
            return Probe(what, "embedded", True, f"{found} (started by each run)")
        return Probe(what, "embedded", False, f"{name} not found: install Debian's "
                     f"{'prometheus' if component == 'prometheus' else name} package or set {var}")
    url = str(cfg.url).rstrip("/")
    answer = get(url + health, timeout)
    doc = answer.json() if answer.status == 200 else None
    if component == "prometheus":
        ok = isinstance(doc, dict) and doc.get("status") == "success"
        detail = f"version {doc['data'].get('version')}" if ok and isinstance(doc, dict) else \
            f"expected Prometheus's {health} JSON, got {answer.got()}"
    else:
        ok = isinstance(doc, dict) and "versionInfo" in doc
        detail = f"version {doc['versionInfo'].get('version')}" if ok and isinstance(doc, dict) else \
            f"expected Alertmanager's {health} JSON, got {answer.got()}"
    return Probe(what, url, ok, detail)


def check_monitoring(env: Any, timeout: float) -> list[Probe]:
    """Prometheus, Alertmanager and each rule file of the environment's monitoring section; each alert that
    reads a metric no scrape target exports."""
    mon = env.monitoring
    if mon is None:
        return []
    out = [_server("prometheus", mon.prometheus, "prometheus", "/api/v1/status/buildinfo", timeout)]
    if mon.alertmanager is not None:
        out.append(_server("alertmanager", mon.alertmanager, "alertmanager", "/api/v2/status", timeout))
    out += [check_rule_file(f, timeout) for f in mon.rule_files]
    return out + check_rule_metrics(env, timeout)  # each alert's metrics on a scrape target
