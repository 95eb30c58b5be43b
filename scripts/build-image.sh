#!/usr/bin/env bash
# Build the simulator image offline: wheels are made on the host into a context dir, the build has no network.
#   scripts/build-image.sh [IMAGE_TAG]     (env: BASE=llm-chaos-base:bookworm, PYTHON=.venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
TAG="${1:-llm-chaos-sim:latest}"
BASE="${BASE:-llm-chaos-base:bookworm}"
PY="${PYTHON:-.venv/bin/python}"
CTX="build/docker-context"
if [[ "$BASE" == llm-chaos-base:* ]]; then scripts/build-base.sh; fi
mkdir -p "$CTX/wheels"
rm -f "$CTX"/wheels/llm_chaos-*.whl
"$PY" -m pip wheel --quiet --wheel-dir "$CTX/wheels" . 
cp docker/Dockerfile "$CTX/Dockerfile"
docker build --network none --build-arg BASE="$BASE" -t "$TAG" "$CTX"
echo "built $TAG from $BASE"
