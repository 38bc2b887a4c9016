#!/usr/bin/env bash
# The main job on the bundled data (docs/main_job.md): set-up and build, then the papers' recipe
# (scripts/recipe.sh gigaword) with one encoder attention kind at the size that fits in about
# 20 minutes on 2 cores: ⟨BERT,BERT⟩ headline training on the bundled Gigaword pairs (paper 000 §7.2
# and Table 2), encoder and decoder starting from the kind's published pretrained encoder
# (data/pretrained/pretrain_KIND.ckpt, configs/gigaword_recipe_bert.json; over 6 seeds it beat random
# weights, docs/findings.md row 10), beam search on the Gigaword test set with the decoding settings
# chosen on the validation pairs, and its ROUGE beside the lead-8 baseline with the first ten test
# headlines (runs/main_job/summary.md). A kind with no published encoder starts from random weights
# (⟨Random,Random⟩, configs/gigaword_recipe.json). Running it again continues an interrupted run.
#   scripts/main_job.sh [KIND]      KIND: hnas (default), lnas, dnas or any registered encoder kind
set -euo pipefail
cd "$(dirname "$0")/.."

kind=${1:-hnas}
start=$SECONDS
scripts/setup.sh
build/hnas --version
if [ -f "data/pretrained/pretrain_$kind.ckpt" ]; then
  scripts/recipe.sh gigaword --no-setup --config configs/gigaword_recipe_bert.json \
    --encoders 'data/pretrained/pretrain_{kind}.ckpt' --kinds "$kind" --out runs/main_job
else
  echo "main job: no published $kind encoder in data/pretrained/, so the headlines start from random weights"
  scripts/recipe.sh gigaword --no-setup --init random --kinds "$kind" --out runs/main_job
fi
echo "main job: $((SECONDS - start)) s, set-up and build included"
