#!/usr/bin/env bash
# The papers' analyses on the tiny headline runs, as in README "Reproducing the papers' analyses":
# trains the tiny config with each kind when its run is missing (runs/gigaword_tiny_<kind>), then for each run
# decodes the bundled test set with beam search and scores it (hnas eval), measures the per-key weight
# sums of the encoder (explaining away), reads the hybrid weights over training, runs the
# mode-collapse toy and Eq. 11-12, and draws every plot into OUT (default docs/analyses).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-docs/analyses}
mkdir -p "$out"
plot() { /usr/bin/python3 scripts/plot_analysis.py "$@"; }

for kind in lnas dnas hnas; do
  run="runs/gigaword_tiny_$kind"
  if [ ! -f "$run/best.ckpt" ]; then
    scripts/setup.sh
    resume=()
    if [ -d "$run/checkpoints" ] && [ -n "$(ls -A "$run/checkpoints")" ]; then resume=(--resume); fi
    build/hnas train --config configs/gigaword_tiny.json --set "model.attention.encoder.kind=$kind" --out "$run" "${resume[@]}"
  fi
  build/hnas eval --checkpoint "$run/best.ckpt" --articles data/gigaword/test_1951/input.txt \
    --references data/gigaword/test_1951/task1_ref0.txt --beam 4 --length-penalty 1.0 --max-len 30 \
    --min-len 1 --no-repeat-ngram 0 \
    --bootstrap 1000 --hypotheses "$out/test_headlines_$kind.txt" --report "$out/eval_$kind.json"
  build/hnas analyze explain-away --checkpoint "$run/best.ckpt" \
    --input data/gigaword/valid_1k/valid.article.filter.txt --output "$out/explain_away_$kind.json"
  plot explain-away "$out/explain_away_$kind.json" --out "$out/explain_away_$kind.png"
done
build/hnas analyze hybrid --run runs/gigaword_tiny_hnas --output "$out/hybrid_weights.json"
plot hybrid "$out/hybrid_weights.json" --out "$out/hybrid_weights.png"

build/hnas toy mode-collapse --output "$out/mode_collapse_500_50.json"
plot toy "$out/mode_collapse_500_50.json" --out "$out/mode_collapse_500_50.png"
build/hnas toy mode-collapse --n0 225 --n1 225 --output "$out/mode_collapse_balanced.json"
plot toy "$out/mode_collapse_balanced.json" --out "$out/mode_collapse_balanced.png"
build/hnas toy centre-distance --output "$out/centre_distance.json"
plot centre-distance "$out/centre_distance.json" --out "$out/centre_distance.png"
