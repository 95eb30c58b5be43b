#!/usr/bin/env bash
# Build the Allure HTML report: installs the Allure 3 CLI into .tools/allure on first use.
#   scripts/report.sh [RESULTS_DIR [REPORT_DIR]]   (defaults: allure-results allure-report)
# History (trend charts) is kept in .state/allure-history.jsonl; set CHAOS_ALLURE_HISTORY to move it.
set -euo pipefail
cd "$(dirname "$0")/.."
results="${1:-allure-results}"
out="${2:-allure-report}"
py="${PYTHON:-.venv/bin/python}"
[ -x "$py" ] || py=python3
exec "$py" -m chaos.cli report --install --results "$results" --out "$out" \
  --history "${CHAOS_ALLURE_HISTORY:-.state/allure-history.jsonl}"
