#!/usr/bin/env bash
# One config over a list of named settings (configs/sweeps/*.json) × 5 seeds, each trial trained and
# tested by `hnas sweep`, then the comparison (OUT/comparison.md), the report and its screenshot.
# With --grid, each listed setting at every grid point. Rerunning continues an interrupted sweep.
#   scripts/sweep_settings.sh CONFIG LIST [--out OUT] [--parallel P] [--set k=v …] [--grid k=[v,…] …]
#   OUT default runs/<config name>_<list name>
# Paper 002's mixers on case distinction (docs/experiments.md):
#   scripts/sweep_settings.sh configs/paper002_cases.json configs/sweeps/paper002_mixers_d64.json
# Paper 004's multi-view attention, every kind and the no-attention baselines:
#   scripts/sweep_settings.sh configs/paper004_multiview.json configs/sweeps/paper004_multiview.json
# Paper 002's learning-rate sweep (Fig. 3's question) of MTE and NAP at d 32 (DNAS: the list
# configs/sweeps/paper002_learning_rate_d32_dnas.json with the same grid):
#   scripts/sweep_settings.sh configs/paper002_cases.json configs/sweeps/paper002_learning_rate_d32.json \
#     --set train.precision=bf16 --grid 'train.learning_rate=[6.56e-5,2.19e-4,7.29e-4,2.43e-3,8.1e-3]'
set -euo pipefail
cd "$(dirname "$0")/.."

usage="usage: scripts/sweep_settings.sh CONFIG LIST [--out OUT] [--parallel P] [--set k=v …] [--grid k=[v,…] …]"
config=""
list=""
out=""
parallel=2
trial_options=()
while (($#)); do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --parallel) parallel=$2; shift 2 ;;
    --set) trial_options+=(--set "$2"); shift 2 ;;
    --grid) trial_options+=(--grid "$2"); shift 2 ;;
    -*) echo "$usage" >&2; exit 2 ;;
    *)
      if [ -z "$config" ]; then config=$1; elif [ -z "$list" ]; then list=$1; else echo "$usage" >&2; exit 2; fi
      shift ;;
  esac
done
if [ -z "$config" ] || [ -z "$list" ]; then echo "$usage" >&2; exit 2; fi
[ -n "$out" ] || out=runs/$(basename "$config" .json)_$(basename "$list" .json)
scripts/setup.sh
start=$(date +%s)
build/hnas sweep --config "$config" --list "$list" --seeds 5 --out "$out" --parallel "$parallel" "${trial_options[@]}"
echo "sweep wall time: $(( $(date +%s) - start )) s"
scripts/report_sweep.sh "$out"
