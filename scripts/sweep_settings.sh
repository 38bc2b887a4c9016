#!/usr/bin/env bash
# One config over a list of named settings (configs/sweeps/*.json) × seeds, each trial trained and
# tested by `hnas sweep`, then the comparison (comparison.md), the report and its screenshot. With
# --grid, each listed setting at every grid point. Rerunning continues an interrupted sweep.
#   scripts/sweep_settings.sh CONFIG LIST [--out OUT] [--seeds N] [--rates '[r1,r2,…]'] [--prediction TEXT]
#                             [--parallel P] [--set k=v …] [--grid k=[v,…] …]
#   OUT default runs/<config name>_<list name>; N default 6 (with 5 the exact paired permutation test
#   cannot reach p < 0.05: its floor is 2/32).
# --rates: each setting's learning rate is chosen on validation before the seeds run — a pilot sweep
#   (OUT/pilot: every setting at every rate, seed 1), scripts/choose_rates.py (OUT/learning_rates.md,
#   OUT/settings.json), then every setting at its rate over the seeds (OUT/final, which the
#   comparison and the report are of).
# --prediction: what the sweep is expected to show, stated before its first run (kept in sweep.json;
#   the report opens with it).
# Runs $HNAS, by default build/hnas after scripts/setup.sh (with HNAS set, no set-up).
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

usage="usage: scripts/sweep_settings.sh CONFIG LIST [--out OUT] [--seeds N] [--rates '[r,…]'] [--prediction TEXT] [--parallel P] [--set k=v …] [--grid k=[v,…] …]"
config=""
list=""
out=""
seeds=6
rates=""
prediction=()
parallel=2
set_options=()
grid_options=()
while (($#)); do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --rates) rates=$2; shift 2 ;;
    --prediction) prediction=(--prediction "$2"); shift 2 ;;
    --parallel) parallel=$2; shift 2 ;;
    --set) set_options+=(--set "$2"); shift 2 ;;
    --grid) grid_options+=(--grid "$2"); shift 2 ;;
    -*) echo "$usage" >&2; exit 2 ;;
    *)
      if [ -z "$config" ]; then config=$1; elif [ -z "$list" ]; then list=$1; else echo "$usage" >&2; exit 2; fi
      shift ;;
  esac
done
if [ -z "$config" ] || [ -z "$list" ]; then echo "$usage" >&2; exit 2; fi
[ -n "$out" ] || out=runs/$(basename "$config" .json)_$(basename "$list" .json)
if [ -z "${HNAS:-}" ]; then scripts/setup.sh; fi
hnas=${HNAS:-build/hnas}
start=$(date +%s)
if [ -n "$rates" ]; then
  "$hnas" sweep --config "$config" --list "$list" --grid "train.learning_rate=$rates" --seeds 1 --out "$out/pilot" \
    --parallel "$parallel" "${set_options[@]}" "${grid_options[@]}"
  echo "pilot wall time: $(( $(date +%s) - start )) s"
  python3 scripts/choose_rates.py "$out/pilot" "$out"
  list=$out/settings.json  # the grid points are settings of their own now
  grid_options=()
  out=$out/final
fi
"$hnas" sweep --config "$config" --list "$list" --seeds "$seeds" --out "$out" --parallel "$parallel" "${prediction[@]}" \
  "${set_options[@]}" "${grid_options[@]}"
echo "sweep wall time: $(( $(date +%s) - start )) s"
HNAS=$hnas scripts/report_sweep.sh "$out"
