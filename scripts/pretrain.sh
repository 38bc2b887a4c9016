#!/usr/bin/env bash
# The pretraining recipe (configs/pretrain.json, chosen by the screen of docs/pretraining.md), once per
# encoder attention kind: masked-LM + sentence-order pretraining on the bundled text that is not test or
# validation data, then the encoder's weights without the optimizer's moments (OUT/<kind>/encoder.ckpt,
# `hnas weights`: what init_from, ⟨BERT,BERT⟩ and fine-tuning start from; data/pretrained/ keeps the
# published ones), and the accuracy against minutes of every run under OUT (scripts/pretrain_curves.py).
#   scripts/pretrain.sh [--kinds hnas,lnas,dnas] [--out DIR] [--config F] [--set key=value …] [--no-setup]
# The run directories are OUT/<kind> (default OUT runs/pretrain); rerunning continues an interrupted run
# from its newest checkpoint and skips a kind whose encoder.ckpt exists.
set -euo pipefail
cd "$(dirname "$0")/.."

kinds=hnas
out=runs/pretrain
config=configs/pretrain.json
setup=1
overrides=()
while (($#)); do
  case "$1" in
    --kinds) kinds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --set) overrides+=(--set "$2"); shift 2 ;;
    --no-setup) setup=0; shift ;;
    *) echo "pretrain.sh: unknown argument '$1' (see the comment at the top of the script)" >&2; exit 2 ;;
  esac
done
if ((setup)); then scripts/setup.sh; fi
mkdir -p "$out"

IFS=, read -r -a kind_list <<<"$kinds"
for kind in "${kind_list[@]}"; do
  dir=$out/$kind
  if [ -f "$dir/encoder.ckpt" ]; then
    echo "pretrain: $dir is finished (encoder.ckpt)"
    continue
  fi
  resume=()
  if [ -d "$dir/checkpoints" ] && [ -n "$(ls -A "$dir/checkpoints")" ]; then resume=(--resume); fi
  build/hnas train --config "$config" --set "model.attention.encoder.kind=$kind" "${overrides[@]}" --out "$dir" "${resume[@]}"
  # The encoder as it ended (the last step checkpoint), not the one of the best validation loss.
  last=$(ls "$dir"/checkpoints/step-*.ckpt | sort | tail -n 1)
  build/hnas weights --checkpoint "$last" --out "$dir/encoder.ckpt"
done
/usr/bin/python3 scripts/pretrain_curves.py "$out" --out "$out" --minutes 10,20,30,40,50,60 --u-trajectory
