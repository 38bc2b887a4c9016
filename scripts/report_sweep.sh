#!/usr/bin/env bash
# hnas report's page of a sweep (OUT/report.html) and, when Chromium is installed, its screenshot
# (OUT/report.png): what scripts/sweep_kinds.sh and scripts/sweep_settings.sh end with.
#   scripts/report_sweep.sh OUT
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/report_sweep.sh OUT (a sweep folder)}
"${HNAS:-build/hnas}" report "$out"
if command -v chromium >/dev/null; then
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,6400 \
    --screenshot="$out/report.png" "file://$(realpath "$out/report.html")" 2>/dev/null
  echo "wrote $out/report.png"
fi
