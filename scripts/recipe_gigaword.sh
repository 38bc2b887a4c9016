#!/usr/bin/env bash
# The papers' recipe on the bundled data (docs/main_job.md), once per encoder attention kind:
#   1. masked-LM pretraining of a BERT-style encoder on all bundled text that is not test or
#      validation data (scripts/pretrain.sh with configs/pretrain.json); --encoders PATTERN skips it
#      and starts from encoders already pretrained ({kind} in PATTERN is replaced by the kind:
#      data/pretrained/pretrain_{kind}.ckpt are the published ones, data/pretrained/README.md);
#   2. ⟨BERT,BERT⟩: the encoder-decoder starts with encoder and decoder from that encoder
#      (cross-attention fresh), then trains on the bundled article/headline pairs; with
#      --init random it skips step 1 and starts from random weights (paper 000 Table 2's
#      ⟨Random,Random⟩ rows);
#   3. beam search on the Gigaword test set, scored with ROUGE-1.5.5 -m (`hnas test`, with the
#      decoding settings of the config's `test` section, chosen on the validation pairs).
# It ends with a table of each kind's test ROUGE beside the lead-8 baseline and the first ten test
# headlines beside their references (OUT/summary.md, scripts/recipe_summary.py).
#   scripts/recipe_gigaword.sh [--kinds lnas,dnas,hnas] [--init bert|random] [--encoders PATTERN] [--bert DIR]
#                              [--out DIR] [--seed S] [--mlm-config F] [--config F] [--set key=value …] [--no-setup]
# --bert DIR: ⟨BERT,BERT⟩ from a real pretrained BERT instead of step 1 — a Hugging Face folder
# (model.safetensors, config.json, vocab.txt; scripts/setup_peers.sh links all-MiniLM-L6-v2 at
# ~/.cache/hnas-peers/minilm) imported by hnas import-bert; the model takes its width, depth, heads,
# post-norm, layer-norm epsilon and WordPiece vocabulary, and the runs are OUT/headline_<kind>-hfbert-seed<S>.
# --set applies to both stages (e.g. --set train.precision=f32). The run directories are
# OUT/mlm-seed<S>/<kind> and OUT/headline_<kind>-<init>-seed<S>; rerunning continues where an
# interrupted run stopped and skips stages that are finished.
set -euo pipefail
cd "$(dirname "$0")/.."

kinds=lnas,dnas,hnas
out=runs/recipe_gigaword
seed=1
init=bert
bert=""
mlm_config=configs/pretrain.json
encoders=""
config=configs/gigaword_recipe.json
setup=1
overrides=()
while (($#)); do
  case "$1" in
    --kinds) kinds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --init) init=$2; shift 2 ;;
    --bert) bert=$2; init=hfbert; shift 2 ;;
    --encoders) encoders=$2; shift 2 ;;
    --mlm-config) mlm_config=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --set) overrides+=(--set "$2"); shift 2 ;;
    --no-setup) setup=0; shift ;;
    *) echo "recipe_gigaword.sh: unknown argument '$1' (see the comment at the top of the script)" >&2; exit 2 ;;
  esac
done
case "$init" in
  bert | random | hfbert) ;;
  *) echo "recipe_gigaword.sh: --init must be bert or random, not '$init'" >&2; exit 2 ;;
esac
if [ -n "$encoders" ] && [ "$init" != bert ]; then
  echo "recipe_gigaword.sh: --encoders starts ⟨BERT,BERT⟩ from them; it cannot go with --init $init or --bert" >&2
  exit 2
fi
IFS=, read -r -a kind_list <<<"$kinds"
declare -A encoder_of  # kind → the encoder its ⟨BERT,BERT⟩ run starts from
if [ -n "$encoders" ]; then
  for kind in "${kind_list[@]}"; do
    encoder_of[$kind]=${encoders//\{kind\}/$kind}
    [ -f "${encoder_of[$kind]}" ] || { echo "recipe_gigaword.sh: --encoders: no pretrained encoder for $kind at ${encoder_of[$kind]}" >&2; exit 1; }
  done
fi
if ((setup)); then scripts/setup.sh; fi
mkdir -p "$out"

# Trains CONFIG into DIR (continuing an interrupted run), then scores it with `hnas test`.
train_and_test() {
  local config=$1 dir=$2
  shift 2
  if [ -f "$dir/result.json" ]; then
    echo "recipe: $dir is finished (result.json)"
    return
  fi
  local resume=()
  if [ -d "$dir/checkpoints" ] && [ -n "$(ls -A "$dir/checkpoints")" ]; then resume=(--resume); fi
  local start=$SECONDS
  build/hnas train --config "$config" --set "seed=$seed" "${overrides[@]}" "$@" --out "$dir" "${resume[@]}"
  build/hnas test "$dir"
  echo "recipe: $dir trained and tested in $((SECONDS - start)) s" | tee -a "$out/wall_times.txt"
}

# The imported BERT and the settings that give the headline model its shape and vocabulary.
bert_settings=()
if [ "$init" = hfbert ]; then
  for file in model.safetensors config.json vocab.txt; do
    [ -f "$bert/$file" ] || { echo "recipe_gigaword.sh: --bert $bert has no $file" >&2; exit 1; }
  done
  [ -f "$out/imported_bert.ckpt" ] || build/hnas import-bert --weights "$bert/model.safetensors" --vocab "$bert/vocab.txt" \
    --config "$bert/config.json" --out "$out/imported_bert.ckpt"
  while read -r setting; do bert_settings+=(--set "$setting"); done < <(python3 - "$bert" "$out/imported_bert.ckpt" <<'PY'
import json, os, sys
c = json.load(open(os.path.join(sys.argv[1], "config.json")))
for key, value in (("init_from", sys.argv[2]), ("model.d_model", c["hidden_size"]), ("model.heads", c["num_attention_heads"]),
                   ("model.ffn_dim", c["intermediate_size"]), ("model.encoder_layers", c["num_hidden_layers"]),
                   ("model.decoder_layers", c["num_hidden_layers"]), ("model.norm", "post"),
                   ("model.layer_norm_eps", c["layer_norm_eps"]), ("tokenizer.type", "wordpiece"),
                   ("tokenizer.model", os.path.join(sys.argv[1], "vocab.txt"))):
    print(f"{key}={value}")
PY
)
fi

for kind in "${kind_list[@]}"; do
  headline_dir=$out/headline_$kind-$init-seed$seed
  if [ "$init" = hfbert ]; then
    train_and_test "$config" "$headline_dir" --set "model.attention.encoder.kind=$kind" "${bert_settings[@]}"
    continue
  fi
  if [ "$init" = random ]; then
    train_and_test "$config" "$headline_dir" --set "model.attention.encoder.kind=$kind"
    continue
  fi
  if [ -z "$encoders" ]; then
    scripts/pretrain.sh --no-setup --kinds "$kind" --out "$out/mlm-seed$seed" --config "$mlm_config" --set "seed=$seed" \
      "${overrides[@]}"
    encoder_of[$kind]=$out/mlm-seed$seed/$kind/encoder.ckpt
  fi
  train_and_test "$config" "$headline_dir" --set "model.attention.encoder.kind=$kind" --set "init_from=${encoder_of[$kind]}"
done

# Lead-8: the first 8 words of each test article, scored as the runs are (ROUGE-1.5.5 -m).
articles=data/gigaword/test_1951/input.txt
references=data/gigaword/test_1951/task1_ref0.txt
awk '{ line = ""; for (i = 1; i <= 8 && i <= NF; i++) line = line (i > 1 ? " " : "") $i; print line }' "$articles" \
  >"$out/lead8.txt"
build/hnas rouge --hyp "$out/lead8.txt" --ref "$references" --stem --json >"$out/lead8.rouge.json"
python3 scripts/recipe_summary.py "$out" "$init" "$seed" "$articles" "$references" "${kind_list[@]}"
