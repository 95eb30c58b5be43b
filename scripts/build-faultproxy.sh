#!/usr/bin/env bash
# Builds chaos-faultproxy (chaos/stack/faultproxy, Go standard library only) into .tools/bin,
# unless the binary is newer than every source file.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=chaos/stack/faultproxy
BIN=.tools/bin/chaos-faultproxy
GO=$(command -v go || true)
if [ -z "$GO" ] && [ -x /usr/local/go/bin/go ]; then
  GO=/usr/local/go/bin/go
fi
if [ -x "$BIN" ] && [ -z "$(find "$SRC" \( -name '*.go' -o -name go.mod \) -newer "$BIN" -print -quit)" ]; then
  exit 0
fi
if [ -z "$GO" ]; then
  echo "build-faultproxy: Go is not installed; install Go >= 1.22 to build chaos-faultproxy" >&2
  exit 1
fi
mkdir -p .tools/bin
echo "building chaos-faultproxy ..."
(cd "$SRC" && CGO_ENABLED=0 "$GO" build -trimpath -o "$OLDPWD/$BIN.tmp" .)
mv "$BIN.tmp" "$BIN"
