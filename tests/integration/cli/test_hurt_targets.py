"""Which target each recovery fault hurts: every target the environment marks (`hurt:`, else the stable
pool), or those --target names; the NCCL faults keep targets with TP > 1 wherever they are listed. The
plan's rows and the suite's test ids name the same targets."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from chaos.env import hurt, parse
from chaos.errors import ConfigError
from chaos.experiment import suite_budgets as budgets
from chaos.experiment.suite_plan import RUN, SKIP, format_plan, plan
from tests.integration.cli.test_cli import chaos

REPO = Path(__file__).resolve().parents[3]

TWO = """name: two
endpoints: {{api: "http://127.0.0.1:9"}}
targets:
  - {{name: gpu-1, kind: docker, image: vllm/vllm-openai, port: 8000, tp_size: 1{one}}}
  - {{name: gpu-2, kind: docker, image: vllm/vllm-openai, port: 8001, tp_size: 2{two},
     vllm: {{model: m, execute_model_timeout_s: 120}}}}
  - {{name: canary, kind: docker, image: vllm/vllm-openai, port: 8002, pool: canary, tp_size: 2{three}}}
"""


def _write(tmp_path: Path, one: str = "", two: str = "", three: str = "") -> Path:
    p = tmp_path / "two.yaml"
    p.write_text(TWO.format(one=one, two=two, three=three))
    return p


def _env(tmp_path: Path, **kw: str):
    p = _write(tmp_path, **kw)
    return parse(p.read_text(), p, {})


def _recovery(rows) -> dict[str, object]:
    return {r.what: r for r in rows if r.suite == "recovery"}


def test_a_tp2_replica_listed_second_is_the_one_the_nccl_faults_hurt_and_the_plan_says_so(tmp_path) -> None:
    env = _env(tmp_path)
    rows = _recovery(plan(env, allow_destructive=False))
    freeze = rows["NCCL rank freeze on gpu-2 (TP 2)"]
    assert freeze.verdict == RUN and freeze.target == "gpu-2"  # type: ignore[attr-defined]
    assert freeze.reason == "waits for the engine's timeout: gpu-2's vllm.execute_model_timeout_s 120"  # type: ignore
    assert not any(w.startswith("NCCL rank freeze on gpu-1") for w in rows)
    # every other fault hurts both stable replicas, each named; the canary is the breaker suite's
    for what in ("GPU driver reset", "crash (SIGKILL)", "engine death (exit 0)", "no-fault baselines"):
        assert {w for w in rows if w.startswith(what)} == {f"{what} on gpu-1", f"{what} on gpu-2"}, rows
    assert "NCCL rank freeze on gpu-2 (TP 2)" in "\n".join(format_plan(plan(env, allow_destructive=False)))
    # the wait for the engine's death is budgeted from the target the freeze hurts, not the first stable one
    wait = next(p for p in budgets.for_suite(env, "recovery").phases if p.phase == "wait for the engine to die")
    assert wait.seconds >= 120 and "gpu-2's vllm.execute_model_timeout_s 120" in wait.why


def test_hurt_marks_and_target_names_choose_the_targets(tmp_path) -> None:
    env = _env(tmp_path, one=", hurt: false", three=", hurt: [nccl-rank-freeze]")
    names = {f: [t.name for t in hurt.chosen(env, f)[0]] for f in hurt.FAULTS}
    assert names["gpu-driver-reset"] == ["gpu-2"] and names["nccl-rank-freeze"] == ["gpu-2", "canary"]
    assert [t.name for t in hurt.chosen(env, "crash-sigkill", ["canary"])[0]] == ["canary"]
    none, why = hurt.chosen(env, "nccl-rank-freeze", ["gpu-1"])
    assert none == [] and why == "target gpu-1 runs TP 1: there is no second rank to freeze"
    rows = _recovery(plan(env, allow_destructive=False, only=["gpu-1"]))
    assert rows["NCCL rank freeze"].verdict == SKIP and "gpu-1 runs TP 1" in rows["NCCL rank freeze"].reason  # type: ignore
    with pytest.raises(ConfigError, match=r"^--target gpu-9: environment two has no such target \(targets: gpu-1, "
                                          r"gpu-2, canary\)$"):
        hurt.chosen(env, None, ["gpu-9"])
    p = _write(tmp_path, two=", hurt: [crash-sigkil]")
    with pytest.raises(ConfigError, match=r"two.yaml:5: targets\[gpu-2\]\.hurt"):
        parse(p.read_text(), p, {})


def _collect(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "suites/recovery", "--env", str(path), "--collect-only",
                           "-q", "-p", "no:cacheprovider", *extra], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})


def test_the_suite_s_test_ids_name_the_target_the_plan_names(tmp_path) -> None:
    p = _write(tmp_path)
    out = _collect(p)
    assert out.returncode == 0, out.stdout + out.stderr
    ids = [line for line in out.stdout.splitlines() if "::" in line]
    assert "suites/recovery/test_recovery.py::test_replica_recovers[nccl-rank-freeze-steady-users-gpu-2]" in ids
    assert not [i for i in ids if "nccl-rank-freeze" in i and "gpu-1" in i], ids
    # the killed rank (issue 32) likewise: only the TP 2 replica has a rank 1 to kill
    assert [i for i in ids if "nccl-rank-kill" in i] == [
        "suites/recovery/test_recovery.py::test_replica_recovers[nccl-rank-kill-steady-users-gpu-2]"], ids
    assert "suites/recovery/test_recovery.py::test_replica_recovers[crash-sigkill-poisson-gpu-1]" in ids
    assert "suites/recovery/test_recovery.py::test_baseline_no_fault[baseline-steady-users-gpu-2]" in ids
    assert "NCCL rank freeze on gpu-2 (TP 2)" in out.stdout  # the plan printed before the run
    only = _collect(p, "--target", "canary")
    ids = [line for line in only.stdout.splitlines() if "::test_replica" in line]
    # the link cut has no target here (no rank link through Toxiproxy), nor the all-reduce hang (no engine
    # plugin): one id each, without a target, that skips
    assert ids and all(i.endswith("-canary]") or "rank-link-cut-steady-users]" in i
                       or "allreduce-hang-steady-users]" in i for i in ids), ids
    bad = _collect(p, "--target", "gpu-9")
    assert bad.returncode != 0 and "--target gpu-9: environment two has no such target" in bad.stderr + bad.stdout


def test_env_check_takes_target_too(tmp_path) -> None:
    out = chaos("env", "check", "--env", str(_write(tmp_path)), "--no-read", "--target", "canary")
    assert out.returncode == 0, out.stderr
    assert "NCCL rank freeze on canary (TP 2)" in out.stdout and "on gpu-1" not in out.stdout
    assert "read from the containers" not in out.stdout
    bad = chaos("env", "check", "--env", str(_write(tmp_path)), "--target", "nope")
    assert bad.returncode != 0 and "--target nope: environment two has no such target" in bad.stderr


def test_the_plan_runs_a_remote_simulator_container_s_engine_death_and_skips_a_process_s() -> None:
    """The simulator's engine death is an admin fault its host's loopback alone may plant: the lab's
    replicas (simulator containers on the GPU host's address) get it from inside their containers, so the
    plan runs it; a simulator process on another address has no container to call from, and skips, in the
    words the suite skips with; a simulator on this machine's loopback runs it."""
    from chaos.env import load
    from chaos.experiment.suite_plan import engine_death_unreachable

    lab = load(str(REPO / "environments" / "lab.yaml"))
    rows = _recovery(plan(lab, allow_destructive=True))
    death = rows["engine death (exit 0) on replica-a"]
    assert death.verdict == RUN and death.target == "replica-a", death  # type: ignore[attr-defined]
    assert rows["crash (SIGKILL) on replica-a"].verdict == RUN  # type: ignore[attr-defined]
    far = lab.target("replica-a").model_copy(update={"kind": "process"})
    assert engine_death_unreachable(far) == (
        "target replica-a: the simulator's engine death is an admin fault, and its admin API answers only on its "
        "own host's loopback (10.231.1.2 is another host, and the target is no container the call could be made from)")
    local = load(str(REPO / "environments" / "local-docker.yaml"))
    rows = _recovery(plan(local, allow_destructive=True))
    assert [r.verdict for w, r in rows.items() if w.startswith("engine death")] == [RUN], rows  # type: ignore
