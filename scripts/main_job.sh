#!/usr/bin/env bash
# The main job on the bundled data (docs/main_job.md): set-up and build, then the papers' recipe
# (scripts/recipe.sh gigaword) for one encoder attention kind, starting from the kind's published
# pretrained encoder (data/pretrained/pretrain_KIND.ckpt, configs/gigaword_recipe_bert.json) or, when it
# has none, from random weights (configs/gigaword_recipe.json); runs/main_job/summary.md at the end.
# Running it again continues an interrupted run.
#   scripts/main_job.sh [KIND]      KIND: hnas (default), lnas, dnas or any registered encoder kind
set -euo pipefail
cd "$(dirname "$0")/.."

kind=${1:-hnas}
start=$SECONDS
scripts/setup.sh
version=$(build/hnas --version)
echo "$version" && precision=()
# The recipe's products are bf16; a CPU without bf16 instructions (AVX2 alone) runs it in f32.
[[ $version != *"no bf16 matmul"* ]] || { echo "main job: no bf16 matmul on this CPU: the recipe runs in f32"; precision=(--set train.precision=f32); }
if [ -f "data/pretrained/pretrain_$kind.ckpt" ]; then
  scripts/recipe.sh gigaword --no-setup --config configs/gigaword_recipe_bert.json \
    --encoders 'data/pretrained/pretrain_{kind}.ckpt' --kinds "$kind" --out runs/main_job "${precision[@]}"
else
  echo "main job: no published $kind encoder in data/pretrained/, so the headlines start from random weights"
  scripts/recipe.sh gigaword --no-setup --init random --kinds "$kind" --out runs/main_job "${precision[@]}"
fi
echo "main job: $((SECONDS - start)) s, set-up and build included"
