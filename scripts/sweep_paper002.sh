#!/usr/bin/env bash
# Paper 002's comparison of mixers on one of its synthetic tasks (issue #17): every setting of a list
# (default configs/sweeps/paper002_mixers_d64.json: BERT, MTE, NAP, NON, sum, max and hnas's dnas,
# hnas, sinkhorn) × 5 seeds, each trained and tested by `hnas sweep`, then the comparison
# (OUT/comparison.md), the report and its screenshot. Rerunning continues an interrupted sweep.
#   scripts/sweep_paper002.sh [CONFIG] [--list FILE] [--out OUT] [--parallel P] [--set k=v …]
#   CONFIG default configs/paper002_cases.json; OUT default runs/<config name>_<list name>
set -euo pipefail
cd "$(dirname "$0")/.."

config=configs/paper002_cases.json
list=configs/sweeps/paper002_mixers_d64.json
out=""
parallel=2
sets=()
while (($#)); do
  case "$1" in
    --list) list=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --parallel) parallel=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    *) config=$1; shift ;;
  esac
done
[ -n "$out" ] || out=runs/$(basename "$config" .json)_$(basename "$list" .json)
scripts/setup.sh
start=$(date +%s)
build/hnas sweep --config "$config" --list "$list" --seeds 5 --out "$out" --parallel "$parallel" "${sets[@]}"
echo "sweep wall time: $(( $(date +%s) - start )) s"
scripts/report_sweep.sh "$out"
