#!/usr/bin/env bash
# The main job on the bundled data: set-up and build, then train the tiny headline model (hnas
# attention in the encoder) on the bundled Gigaword pairs, validating with greedy decoding and
# ROUGE-L; the run directory is runs/gigaword_tiny_hnas (metrics.jsonl, checkpoints, best.ckpt).
# Running it again resumes an interrupted run.
#   scripts/main_job.sh [CONFIG [KIND]]
# CONFIG (default configs/gigaword_tiny.json) trains into runs/<config name>_<encoder kind>; KIND
# (any registered attention kind: lnas, dnas, hnas, sinkhorn, dnas_causal, nap) replaces the config's
# encoder self-attention, e.g. scripts/main_job.sh configs/gigaword_tiny.json lnas.
set -euo pipefail
cd "$(dirname "$0")/.."

config=${1:-configs/gigaword_tiny.json}
kind=${2:-}
scripts/setup.sh
build/hnas --version
overrides=()
if [ -n "$kind" ]; then overrides=(--set "model.attention.encoder.kind=$kind"); fi
# The encoder kind the run trains, for its directory name: the override, else the config's.
kind=$(build/hnas inspect "$config" "${overrides[@]}" --vocab-size 8000 \
  | /usr/bin/python3 -c 'import json, sys; text = sys.stdin.read(); print(json.JSONDecoder().raw_decode(text)[0]["model"]["attention"]["encoder"]["kind"])')
run_dir="runs/$(basename "$config" .json)_$kind"
if [ -d "$run_dir/checkpoints" ] && [ -n "$(ls -A "$run_dir/checkpoints")" ]; then
  build/hnas train --config "$config" "${overrides[@]}" --out "$run_dir" --resume
else
  build/hnas train --config "$config" "${overrides[@]}" --out "$run_dir"
fi
