#!/usr/bin/env bash
# The tiny headline model with lnas, dnas and hnas in the encoder over seeds (docs/experiments.md),
# every trial tested with beam search and ROUGE on the bundled Gigaword test set; then the
# comparison (OUT/comparison.md), the report (OUT/report.html) and, when Chromium is installed, its
# screenshot (OUT/report.png). Rerunning continues an interrupted sweep.
#   scripts/sweep_kinds.sh [OUT] [--parallel P] [--seeds N]   (OUT default runs/sweep_gigaword_tiny_kinds;
#                                                             N default 6; docs/experiments.md ran 5)
set -euo pipefail
cd "$(dirname "$0")/.."

out=runs/sweep_gigaword_tiny_kinds
parallel=2
seeds=6
while (($#)); do
  case "$1" in
    --parallel) parallel=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    *) out=$1; shift ;;
  esac
done
scripts/setup.sh
start=$(date +%s)
build/hnas sweep --config configs/gigaword_tiny.json --grid 'model.attention.encoder.kind=[lnas,dnas,hnas]' \
  --seeds "$seeds" --out "$out" --parallel "$parallel"
echo "sweep wall time: $(( $(date +%s) - start )) s"
scripts/report_sweep.sh "$out"
