"""`chaos backoff-check --failure abort-finish`: a whole 200 that ends with no token and
finish_reason "abort" (real vLLM's answer when it shuts down) is a failure to retry. A client that
takes it for an answer fails `retries`; the reference client, which records it as `aborted`, passes."""
from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PY = shlex.quote(sys.executable)
CHAOS = [sys.executable, "-m", "chaos.cli", "backoff-check", "--failure", "abort-finish", "--client-cmd"]

# sends once and prints whatever 200 came back: the client that believes an aborted answer
NAIVE = """
import json, sys, urllib.request
req = urllib.request.Request(sys.argv[1].rstrip("/") + "/v1/chat/completions", method="POST",
    data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode(),
    headers={"content-type": "application/json"})
print(urllib.request.urlopen(req, timeout=10).read()[:200])
"""


def test_a_client_that_takes_an_aborted_answer_fails_and_the_reference_client_passes(tmp_path: Path) -> None:
    naive = tmp_path / "naive_client.py"
    naive.write_text(NAIVE)
    r = subprocess.run([*CHAOS, f"{PY} {naive} {{base_url}}"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 1 and r.stdout.strip().splitlines()[-1] == "FAIL: retries", r.stdout[-1500:] + r.stderr[-500:]
    ref = f"{PY} {ROOT / 'examples' / 'clients' / 'reference_client.py'} {{base_url}}"
    r = subprocess.run([*CHAOS, ref], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout[-1500:] + r.stderr[-500:]
