#!/usr/bin/env bash
# Installs the LiteLLM proxy (PyPI litellm[proxy]) into its own venv, .tools/litellm/venv, apart
# from the harness's .venv (its ~110 dependencies pin their own FastAPI, pydantic and OpenAI SDK).
# The dependency versions are held at those the tests were judged with (litellm-constraints.txt).
# Skipped when the stamp file says this version is installed. The gateway is started by the stack
# (gateway.kind: litellm), offline: LITELLM_LOCAL_MODEL_COST_MAP=True.
#
# Why 1.108.7 and not the newest: from 1.109.0 the proxy extra pins litellm-proxy-extras 0.4.113 and
# 1.110.x a litellm-proxy package, neither of which PyPI serves here; 1.108.8-14 pin a
# litellm-enterprise 0.1.79.post2 it does not serve either.
set -euo pipefail
cd "$(dirname "$0")/.."
LITELLM_VERSION=${LITELLM_VERSION:-1.108.7}
PYTHON=${PYTHON:-python3}
BASE=.tools/litellm
VENV=$BASE/venv
STAMP=$BASE/.installed
WANT="litellm[proxy]==$LITELLM_VERSION"

fail() { echo "setup-litellm: $*" >&2; exit 1; }

if [ -x "$VENV/bin/litellm" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$WANT" ]; then
  echo "setup-litellm: $WANT already installed in $VENV"
  exit 0
fi
command -v "$PYTHON" >/dev/null 2>&1 || fail "$PYTHON not found (Python >= 3.10 is needed)"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 10))' || fail "$PYTHON is $("$PYTHON" -V 2>&1); LiteLLM needs >= 3.10"
start=$(date +%s)
mkdir -p "$BASE"
LOG=$BASE/setup.log
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV" >"$LOG" 2>&1 || fail "python -m venv $VENV failed; see $LOG"
"$VENV/bin/python" -m pip install -q --upgrade pip >>"$LOG" 2>&1 || true
"$VENV/bin/python" -m pip install -q -c scripts/litellm-constraints.txt "$WANT" >>"$LOG" 2>&1 \
  || fail "pip install $WANT failed (last line: $(tail -1 "$LOG")); see $LOG"
LITELLM_LOCAL_MODEL_COST_MAP=True "$VENV/bin/python" -c "import litellm.proxy.proxy_server" >>"$LOG" 2>&1 \
  || fail "the proxy does not import (last line: $(tail -1 "$LOG")); see $LOG"
echo "$WANT" > "$STAMP"
echo "setup-litellm: $WANT installed in $VENV in $(( $(date +%s) - start )) s"
