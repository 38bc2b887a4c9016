#!/usr/bin/env bash
# The main job on the bundled data: set-up and build, then train the tiny headline model (hnas
# attention in the encoder) on the bundled Gigaword pairs, validating with greedy decoding and
# ROUGE-L; the run directory is runs/gigaword_tiny_hnas (metrics.jsonl, checkpoints, best.ckpt).
# Pass a config to train another one: scripts/main_job.sh configs/gigaword_tiny_lnas.json
set -euo pipefail
cd "$(dirname "$0")/.."

config=${1:-configs/gigaword_tiny_hnas.json}
scripts/setup.sh
build/hnas --version
run_dir="runs/$(basename "$config" .json)"
if [ -d "$run_dir/checkpoints" ] && [ -n "$(ls -A "$run_dir/checkpoints")" ]; then
  build/hnas train --config "$config" --out "$run_dir" --resume
else
  build/hnas train --config "$config" --out "$run_dir"
fi
