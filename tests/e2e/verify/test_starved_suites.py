"""The clients and streams suites on a client the host starves: the team's client command (llm-chaos's
reference client) listed in a copy of environments/local.yaml, run in a CPU cgroup capped at 2 % of a
core. Both suites say "not proven: the host starved the client (N s of CPU in M s)", fail nothing and
wait on nobody to a limit; the uncapped runs of the same command are tests/integration/verify/test_starved_client.py."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._support import cpu_capped_cgroup, free_port_offset, in_cgroup

ROOT = Path(__file__).resolve().parents[3]
STARVED = "the host starved the client ("


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_clients_and_streams_suites_say_a_starved_client_is_not_proven(tmp_path: Path) -> None:
    with cpu_capped_cgroup() as procs:
        client = in_cgroup(procs, f"{shlex.quote(sys.executable)} {ROOT / 'examples' / 'clients' / 'reference_client.py'}"
                                  " {base_url} --timeout 5")
        text = (ROOT / "environments" / "local.yaml").read_text()
        old = "state_dir: ../.state/local"
        assert old in text and "\nclient_commands:" not in text, "environments/local.yaml changed"
        text = text.replace(old, "state_dir: .state") + f"\nclient_commands:\n  starved: {json.dumps(client)}\n"
        # it lists a client now: local's expectation that these stay unproven for want of one no longer holds
        text = "\n".join(l for l in text.splitlines() if not l.startswith(("  retry-interval-500ms:", "  exponential-backoff:")))
        env_file = tmp_path / "local-starved-client.yaml"
        env_file.write_text(text)
        t0 = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "suites/clients/test_backoff_compliance.py", "suites/streams/test_streams.py",
             "--env", str(env_file), "-k", "listed or (cut-after-3 and not naive and not done)", "-q", "-p", "no:cacheprovider",
             "-o", "addopts=", f"--basetemp={tmp_path / 'run'}"],
            cwd=ROOT, capture_output=True, text=True, timeout=560,
            env={**os.environ, "CHAOS_PORT_OFFSET": str(free_port_offset(text))})
        took = time.monotonic() - t0
    out = proc.stdout[-8000:] + proc.stderr[-2000:]
    assert proc.returncode == 0 and re.search(r"\b2 passed", out), out  # nothing FAILED on a client that could not run
    # the clients suite: its checklist items are not proven, for the host's reason
    row = next((l for l in out.splitlines() if "retry-interval-500ms" in l), "")
    assert "NOT PROVEN" in row and STARVED in row, out
    # the streams suite: its client verdicts say the same, first
    journal = next(p for p in (tmp_path / "run").rglob("journal.json") if "cut-after-3" in str(p))
    rows = [r for e in json.loads(journal.read_text())["events"] if e["event"] == "VerdictReached"
            and "client starved" in e["name"] for r in e["rows"]]
    assert rows and all("not proven" in r for r in rows if r.startswith("client_cpu")), rows
    assert any(r.startswith("client_cpu") and STARVED in r for r in rows), rows
    assert "cut-after-3=not proven" in out, out  # the suite's summary line too
    assert took < 420, f"the two suites took {took:.0f} s on a client that could not run"
