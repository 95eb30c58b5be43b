#!/usr/bin/env bash
# Build the real-vLLM image offline from `make setup-vllm`'s venv and model (no download):
#   scripts/build-vllm-image.sh [IMAGE_TAG]     (env: BASE=llm-chaos-base:bookworm)
# The context hard-links the venv's site-packages (6.3 GB) instead of copying them.
set -euo pipefail
cd "$(dirname "$0")/.."
TAG="${1:-llm-chaos-vllm:latest}"
BASE="${BASE:-llm-chaos-base:bookworm}"
VLLM=.tools/vllm
CTX=build/vllm-context
[[ -x $VLLM/bin/vllm && -d $VLLM/models/tiny-llama ]] || { echo "build-vllm-image: no $VLLM (run make setup-vllm)" >&2; exit 1; }
if [[ "$BASE" == llm-chaos-base:* ]]; then scripts/build-base.sh; fi
SITE=$(ls -d $VLLM/venv/lib/python3.11/site-packages) || { echo "build-vllm-image: the vllm venv is not Python 3.11" >&2; exit 1; }
rm -rf "$CTX" && mkdir -p "$CTX"
cp -al "$SITE" "$CTX/site-packages" 2>/dev/null || cp -a "$SITE" "$CTX/site-packages"
cp -a $VLLM/models/tiny-llama "$CTX/model"
cp $VLLM/bin/vllm "$CTX/vllm"
mkdir -p "$CTX/libs"  # vllm._C links libnuma.so.1, which the base image lacks: take the host's (bookworm's libnuma1)
NUMA=$(ldconfig -p | awk '/libnuma\.so\.1 /{print $NF; exit}')
[[ -n "$NUMA" ]] || { echo "build-vllm-image: libnuma.so.1 not found on this host (apt-get install libnuma1)" >&2; exit 1; }
cp -L "$NUMA" "$CTX/libs/libnuma.so.1"
cp docker/Dockerfile.vllm "$CTX/Dockerfile"
docker build --network none --build-arg BASE="$BASE" -t "$TAG" "$CTX"
rm -rf "$CTX"
echo "built $TAG from $BASE"
