#!/usr/bin/env bash
# The main job on the bundled data (docs/main_job.md): set-up and build, then the papers' recipe
# (scripts/recipe_gigaword.sh) with one encoder attention kind at the size that fits in about
# 30 minutes on 2 cores: headline training on the bundled Gigaword pairs from random weights (paper
# 000 Table 2's ⟨Random,Random⟩; at this budget it beats starting from a pretrained encoder, see
# docs/main_job.md), beam search on the Gigaword test set with the decoding settings chosen on the
# validation pairs, and its ROUGE beside the lead-8 baseline with the first ten test headlines
# (runs/main_job/summary.md). Running it again continues an interrupted run.
#   scripts/main_job.sh [KIND]      KIND: hnas (default), lnas, dnas or any registered encoder kind
set -euo pipefail
cd "$(dirname "$0")/.."

kind=${1:-hnas}
start=$SECONDS
scripts/setup.sh
build/hnas --version
scripts/recipe_gigaword.sh --no-setup --init random --kinds "$kind" --out runs/main_job
echo "main job: $((SECONDS - start)) s, set-up and build included"
