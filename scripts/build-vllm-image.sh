#!/usr/bin/env bash
# Build the real-vLLM image offline from `make setup-vllm`'s venv and model (no download):
#   scripts/build-vllm-image.sh [IMAGE_TAG]     (env: BASE=llm-chaos-base:bookworm)
# Two steps: the toolchain image (BASE + Debian's g++, python3.11-dev, libnuma1 from the Debian mirror:
# docker/Dockerfile.vllm-toolchain), built once and rebuilt when its recipe changes; then the image on
# top of it with no network. The context hard-links the venv's site-packages (6.3 GB) instead of copying.
set -euo pipefail
cd "$(dirname "$0")/.."
TAG="${1:-llm-chaos-vllm:latest}"
BASE="${BASE:-llm-chaos-base:bookworm}"
TOOLCHAIN="${TOOLCHAIN:-llm-chaos-vllm-toolchain:bookworm}"
VLLM=.tools/vllm
CTX=build/vllm-context
[[ -x $VLLM/bin/vllm && -d $VLLM/models/tiny-llama && -f $VLLM/.installed ]] || { echo "build-vllm-image: no $VLLM (run make setup-vllm)" >&2; exit 1; }
if [[ "$BASE" == llm-chaos-base:* ]]; then scripts/build-base.sh; fi
SITE=$(ls -d $VLLM/venv/lib/python3.11/site-packages) || { echo "build-vllm-image: the vllm venv is not Python 3.11" >&2; exit 1; }
# the toolchain's recipe: its Dockerfile and the base's id; an image with another recipe is rebuilt
RECIPE=$( { cat docker/Dockerfile.vllm-toolchain; docker image inspect -f '{{.Id}}' "$BASE"; } | sha256sum | cut -c1-16)
if [[ "$(docker image inspect -f '{{index .Config.Labels "llm-chaos.recipe"}}' "$TOOLCHAIN" 2>/dev/null)" != "$RECIPE" ]]; then
  docker build --build-arg BASE="$BASE" --label llm-chaos.recipe="$RECIPE" -t "$TOOLCHAIN" \
    -f docker/Dockerfile.vllm-toolchain docker \
    || { echo "build-vllm-image: the toolchain image $TOOLCHAIN failed (apt-get from the Debian mirror)" >&2; exit 1; }
fi
rm -rf "$CTX" && mkdir -p "$CTX"
cp -al "$SITE" "$CTX/site-packages" 2>/dev/null || cp -a "$SITE" "$CTX/site-packages"
cp -a $VLLM/models/tiny-llama "$CTX/model"
cp $VLLM/bin/vllm "$CTX/vllm"
cp $VLLM/.installed "$CTX/installed"
cp scripts/warm-vllm-tp2.py "$CTX/warm-vllm-tp2.py"
cp docker/Dockerfile.vllm "$CTX/Dockerfile"
# --shm-size: the build's warm-up runs vLLM at TP 2, whose ranks talk over /dev/shm
docker build --network none --shm-size 2g --build-arg BASE="$TOOLCHAIN" -t "$TAG" "$CTX"
rm -rf "$CTX"
echo "built $TAG from $TOOLCHAIN ($BASE)"
