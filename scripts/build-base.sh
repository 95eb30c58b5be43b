#!/usr/bin/env bash
# Build the offline base image llm-chaos-base:bookworm (debootstrap minbase + python3) once; cached.
set -euo pipefail
IMAGE="${CHAOS_BASE_IMAGE:-llm-chaos-base:bookworm}"
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "base image $IMAGE exists; skipping"; exit 0
fi
command -v debootstrap >/dev/null || { echo "build-base: debootstrap not installed" >&2; exit 2; }
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,procps bookworm "$DIR" ${DEBIAN_MIRROR:-}
tar -C "$DIR" -c . | docker import - "$IMAGE"
echo "built $IMAGE"
