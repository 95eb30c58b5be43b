#!/usr/bin/env bash
# Installs the real Toxiproxy server (v2.12.0) into .tools/bin unless one is already on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=v2.12.0
BIN=.tools/bin/toxiproxy-server
if command -v toxiproxy-server >/dev/null 2>&1; then
  exit 0
fi
if [ -x "$BIN" ] && [ "$(cat .tools/bin/.toxiproxy-version 2>/dev/null)" = "$VERSION" ]; then
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "install-toxiproxy: Go is not installed; install Go >= 1.23 or put toxiproxy-server on PATH" >&2
  exit 1
fi
mkdir -p .tools/bin .tools/gobin
echo "installing toxiproxy-server $VERSION with go install ..."
GOBIN="$PWD/.tools/gobin" GOFLAGS=-mod=mod go install "github.com/Shopify/toxiproxy/v2/cmd/server@$VERSION"
mv .tools/gobin/server "$BIN"
echo "$VERSION" > .tools/bin/.toxiproxy-version
