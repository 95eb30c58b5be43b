"""The GPU rows of a recovery verdict, per GPU: memory released after a crash (and taken again by the
restart) on each of the hurt target's GPUs, and the Xids that appeared during the scenario.

Xid events on the timeline are new by construction (the sources report only what appeared after the
scenario's start), so every one is a finding: under a non-GPU fault it fails the verdict; under a GPU
fault the fault's expected codes are listed and any other code fails.
"""
from __future__ import annotations

import statistics
from collections.abc import Collection, Sequence

from chaos.env.model import SLAs
from chaos.observe.gpu import by_gpu
from chaos.observe.timeline import Sample, Timeline
from chaos.verify.verdict import Verdict


def _release_rows(v: Verdict, name: str, mem: Sequence[Sample], t_inject: float, slas: SLAs, release: float,
                  retake: float) -> None:
    suffix = f"[{name}]" if name else ""
    before = [float(s.value) for s in mem if s.t < t_inject]
    after = sorted((s for s in mem if s.t >= t_inject), key=lambda s: s.t)
    if not before or not after:
        v.add(f"gpu_mem_released_s{suffix}", slas.gpu_memory_release_s, None, None, "no GPU samples around the fault")
        return
    base = statistics.median(before)
    freed = next((s for s in after if float(s.value) <= base * release), None)
    v.add(f"gpu_mem_released_s{suffix}", slas.gpu_memory_release_s,
          None if freed is None else round(freed.t - t_inject, 3),
          freed is not None and freed.t - t_inject <= slas.gpu_memory_release_s,
          f"baseline {base / 2**30:.2f} GiB; released means <= {release:.0%} of it")
    if freed is None:
        return
    back = next((s for s in after if s.t > freed.t and float(s.value) >= base * retake), None)
    v.add(f"gpu_mem_retaken_s{suffix}", slas.cold_start_s, None if back is None else round(back.t - freed.t, 3),
          back is not None and back.t - freed.t <= slas.cold_start_s,
          f"from release to >= {retake:.0%} of baseline again (restart loaded the model)")


def memory_rows(v: Verdict, timeline: Timeline, t_inject: float, slas: SLAs, *, target: str | None = None,
                release: float = 0.5, retake: float = 0.8) -> None:
    """gpu_mem_released_s / gpu_mem_retaken_s for each GPU of `target` (all GPUs when None); one GPU
    keeps the plain row names, several get `[target/gpu N]` each (a TP group frees every rank's memory)."""
    groups = by_gpu(timeline.series("gpu", "mem_used"), target)
    if not groups:
        why = "no GPU visible: no GPU samples on the timeline" + (f" for {target}" if target else "")
        v.add("gpu_mem_released_s", slas.gpu_memory_release_s, None, None, why)
        return
    for name, mem in groups.items():
        _release_rows(v, name if len(groups) > 1 else "", mem, t_inject, slas, release, retake)


def xid_row(v: Verdict, timeline: Timeline, expected: Collection[int] | None = None) -> None:
    """new_xids: the Xids that appeared during the scenario, per GPU. `expected` None: a non-GPU fault,
    any Xid fails; else a GPU fault whose own codes are listed as expected and any other fails."""
    seen = []
    for e in timeline.find_events("xid"):
        tgt, dev = e.detail.get("target"), e.detail.get("gpu", "0")
        seen.append((f"{tgt}/gpu {dev}" if tgt else f"gpu {dev}", int(e.detail.get("code", 0))))
    gpus = len(by_gpu(timeline.series("gpu", "mem_used")) or by_gpu(timeline.series("gpu", "temp_c")))
    allowed = set(expected or ())
    bad = [f"Xid {c} on {g}" for g, c in seen if c not in allowed]
    listed = [f"Xid {c} on {g} (expected of this GPU fault)" for g, c in seen if c in allowed]
    if expected is None:
        detail = (f"new during a non-GPU fault: {', '.join(bad)}" if bad
                  else f"none new on {gpus} GPU(s) since the scenario's start")
    else:
        want = ", ".join(str(c) for c in sorted(allowed)) or "none"
        detail = "; ".join(p for p in (", ".join(listed), f"unexpected: {', '.join(bad)}" if bad else "") if p) \
            or f"none new on {gpus} GPU(s); this GPU fault may raise Xid {want}"
    v.add("new_xids", 0 if expected is None else sorted(allowed), len(seen), not bad, detail)
