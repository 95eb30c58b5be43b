"""Every benchmark under bench/ runs in its short mode and ends with its RESULT line, so none rots unseen.

The figures of a short run are not judged (seconds on a shared host); what is checked is that the
script still starts, runs its code paths and prints the keys its issue named. A new script without an
entry in RESULT_KEYS fails `test_every_bench_script_has_an_entry`."""
from __future__ import annotations

import subprocess

import pytest

from tests._bench import BENCH, RESULT_KEYS, result_line, run_short
from tests._support import REPO, free_port_offset, require

# what a script needs beyond the package (tests/_support.require: skipped, or failed under CHAOS_REQUIRE)
NEEDS = {"faults.py": ("toxiproxy",), "faultproxy.py": ("toxiproxy",)}
TIMEOUT_S = {"capacity.py": 300}  # one restart trial and its control on the embedded stack; the rest take seconds
DEFAULT_TIMEOUT_S = 180


def test_every_bench_script_has_an_entry() -> None:
    scripts = {p.name for p in BENCH.glob("*.py")}
    assert scripts == set(RESULT_KEYS), (f"bench/ scripts without an entry in RESULT_KEYS: "
                                         f"{sorted(scripts - set(RESULT_KEYS))}; entries without a script: "
                                         f"{sorted(set(RESULT_KEYS) - scripts)}")


def test_result_line_rejects_a_missing_or_malformed_line() -> None:
    assert result_line("table\nRESULT a=1 b=none\n") == {"a": "1", "b": "none"}
    for bad in ("RESULT a=1\ntrailing words", "", "RESULT a=1 oops"):
        with pytest.raises(AssertionError):
            result_line(bad)


@pytest.mark.parametrize("script", sorted(RESULT_KEYS))
def test_short_mode_prints_its_result(script: str) -> None:
    for component in NEEDS.get(script, ()):
        require(component)
    timeout = TIMEOUT_S.get(script, DEFAULT_TIMEOUT_S)
    env = {}
    if script == "capacity.py":  # the embedded stack of `local`, at ports no other stack holds now
        env["CHAOS_PORT_OFFSET"] = str(free_port_offset((REPO / "environments" / "local.yaml").read_text()))
    try:
        rc, out, err = run_short(script, timeout, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"bench/{script} --short ran past {timeout} s: {str(e.stdout)[-2000:]}")
    assert rc == 0, f"bench/{script} --short exited {rc}:\n{out[-3000:]}\n{err[-3000:]}"
    got = result_line(out)
    missing = [k for k in RESULT_KEYS[script] if k not in got]
    assert not missing, f"bench/{script} --short: RESULT lacks {missing}: {out.splitlines()[-1]!r}"
