#!/usr/bin/env bash
# PNG screenshot of a built Allure report in headless Chromium (served on 127.0.0.1).
#   scripts/screenshot-report.sh REPORT_DIR OUT.png [WIDTHxHEIGHT] [FRAGMENT]
# e.g. scripts/screenshot-report.sh allure-report docs/report.png 1400x900
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 REPORT_DIR OUT.png [WIDTHxHEIGHT] [FRAGMENT]" >&2
  exit 2
fi
here="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-$here/.venv/bin/python}"
[ -x "$py" ] || py=python3
exec "$py" -m chaos.report.screenshot "$@"
