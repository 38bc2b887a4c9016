#!/usr/bin/env bash
# The papers' recipes on the bundled data, one subcommand each (the README's command table and the docs named
# here tell what they do); rerunning one continues an interrupted run and skips what is finished. Runs $HNAS,
# by default build/hnas (gigaword and pretrain run scripts/setup.sh first unless --no-setup).
#
#   scripts/recipe.sh gigaword [--kinds lnas,dnas,hnas] [--init bert|random] [--encoders PATTERN] [--bert DIR]
#                              [--out DIR] [--seed S] [--mlm-config F] [--config F] [--set key=value …] [--no-setup]
#     docs/main_job.md: per kind, masked-LM pretraining (--mlm-config, default configs/pretrain.json; none with
#     --init random, or --encoders, {kind} replaced by the kind), ⟨BERT,BERT⟩ headline training (--config, default
#     configs/gigaword_recipe.json; --bert: from a Hugging Face BERT folder, with its shape and WordPiece
#     vocabulary), `hnas test`, then OUT/summary.md. --set applies to both stages. Runs: OUT/mlm-seed<S>/<kind>
#     and OUT/headline_<kind>-<bert|random|hfbert>-seed<S> (default OUT runs/recipe_gigaword).
#   scripts/recipe.sh pretrain [--kinds hnas,lnas,dnas] [--out DIR] [--config F] [--set key=value …] [--no-setup]
#     docs/pretraining.md: per kind into OUT/<kind> (default OUT runs/pretrain), the encoder as it ended in
#     OUT/<kind>/encoder.ckpt, then scripts/summarize.py pretrain of every run under OUT.
#   scripts/recipe.sh finetune --prediction FILE [--seeds N] [--kinds "lnas dnas hnas"] [--scratch-kinds "…"]
#                              [--encoders PATTERN] [--tokenizer FILE] [--tasks "headline_match sotu_era"]
#                              [--bert DIR] [--bert-kinds "lnas hnas dnas"] [--out DIR]
#     docs/finetune.md: each arm's learning rate chosen on validation, then N seeds (default 6) at it; the
#     tables in OUT/results.md (default OUT runs/finetune).
#   scripts/recipe.sh decoding CHECKPOINT [OUT] [--beam B] [--length-penalty "0.6 1.0 …"] [--no-repeat-ngram "0 2 3"]
#                              [--min-len "1 4"]
#     docs/main_job.md: the decoding grid on the validation pairs, OUT/decoding_grid.md (default OUT
#     CHECKPOINT's folder/decoding).
#   scripts/recipe.sh analyses [OUT]
#     docs/analyses.md: the papers' analyses and their plots into OUT (default docs/analyses).
set -euo pipefail
cd "$(dirname "$0")/.."

hnas=${HNAS:-build/hnas}
articles=data/gigaword/test_1951/input.txt
references=data/gigaword/test_1951/task1_ref0.txt
die() { echo "recipe.sh $command: $*" >&2; exit 2; }
source scripts/options.sh

# train DIR ARGS…: hnas train into DIR, resuming when DIR holds checkpoints.
train() {
  local dir=$1 resume=()
  shift
  if [ -d "$dir/checkpoints" ] && [ -n "$(ls -A "$dir/checkpoints")" ]; then resume=(--resume); fi
  "$hnas" train "$@" --out "$dir" "${resume[@]}"
}

# import_bert DIR CHECKPOINT: the Hugging Face BERT folder DIR as an hnas checkpoint (once).
import_bert() {
  for file in model.safetensors config.json vocab.txt; do [ -f "$1/$file" ] || die "--bert $1 has no $file"; done
  [ -f "$2" ] || "$hnas" import-bert --weights "$1/model.safetensors" --vocab "$1/vocab.txt" --config "$1/config.json" \
    --out "$2" >"$2.log" 2>&1
}

# bert_shape DIR CHECKPOINT KEY…: key=value lines that start a model from the imported BERT with its shape and
# vocabulary: init_from, the tokenizer and the model keys named.
bert_shape() {
  python3 - "$@" <<'PY'
import json, os, sys
bert, checkpoint, keys = sys.argv[1], sys.argv[2], sys.argv[3:]
c = json.load(open(os.path.join(bert, "config.json")))
shape = {"d_model": c["hidden_size"], "heads": c["num_attention_heads"], "ffn_dim": c["intermediate_size"],
         "encoder_layers": c["num_hidden_layers"], "decoder_layers": c["num_hidden_layers"], "norm": "post",
         "max_positions": c["max_position_embeddings"], "layer_norm_eps": c["layer_norm_eps"]}
print(f"init_from={checkpoint}")
for key in keys:
    print(f"model.{key}={shape[key]}")
print(f"tokenizer.type=wordpiece\ntokenizer.model={os.path.join(bert, 'vocab.txt')}")
PY
}

pretrain() {
  local kinds=hnas out=runs/pretrain config=configs/pretrain.json no_setup=0 settings=() overrides=() setting
  options "kinds out config set" "no-setup" 0 "$@"
  for setting in "${settings[@]}"; do overrides+=(--set "$setting"); done
  if ((!no_setup)); then scripts/setup.sh; fi
  mkdir -p "$out"
  local kind dir last kind_list
  IFS=, read -r -a kind_list <<<"$kinds"
  for kind in "${kind_list[@]}"; do
    dir=$out/$kind
    if [ -f "$dir/encoder.ckpt" ]; then echo "pretrain: $dir is finished (encoder.ckpt)"; continue; fi
    train "$dir" --config "$config" --set "model.attention.encoder.kind=$kind" "${overrides[@]}"
    # The encoder as it ended (the last step checkpoint), not the one of the best validation loss.
    last=$(ls "$dir"/checkpoints/step-*.ckpt | sort | tail -n 1)
    "$hnas" weights --checkpoint "$last" --out "$dir/encoder.ckpt"
  done
  /usr/bin/python3 scripts/summarize.py pretrain "$out" --out "$out" --minutes 10,20,30,40,50,60 --u-trajectory
}

gigaword() {
  local kinds=lnas,dnas,hnas out=runs/recipe_gigaword seed=1 init=bert bert="" mlm_config=configs/pretrain.json
  local encoders="" config=configs/gigaword_recipe.json no_setup=0 settings=() overrides=() setting
  options "kinds out seed init bert encoders mlm-config config set" "no-setup" 0 "$@"
  for setting in "${settings[@]}"; do overrides+=(--set "$setting"); done
  [ -z "$bert" ] || init=hfbert
  [[ $init =~ ^(bert|random|hfbert)$ ]] || die "--init must be bert or random, not '$init'"
  [ -z "$encoders" ] || [ "$init" = bert ] || die "--encoders starts ⟨BERT,BERT⟩ from them; it cannot go with --init $init or --bert"
  local kind start dir kind_list
  IFS=, read -r -a kind_list <<<"$kinds"
  declare -A encoder_of  # kind → the encoder its ⟨BERT,BERT⟩ run starts from
  for kind in "${kind_list[@]}"; do
    encoder_of[$kind]=${encoders//\{kind\}/$kind}
    [ -z "$encoders" ] || [ -f "${encoder_of[$kind]}" ] || die "--encoders: no pretrained encoder for $kind at ${encoder_of[$kind]}"
  done
  if ((!no_setup)); then scripts/setup.sh; fi
  mkdir -p "$out"
  local start_from=()
  if [ "$init" = hfbert ]; then
    import_bert "$bert" "$out/imported_bert.ckpt"
    while read -r setting; do start_from+=(--set "$setting"); done < <(bert_shape "$bert" "$out/imported_bert.ckpt" \
      d_model heads ffn_dim encoder_layers decoder_layers norm layer_norm_eps)
  fi
  for kind in "${kind_list[@]}"; do
    dir=$out/headline_$kind-$init-seed$seed
    if [ -f "$dir/result.json" ]; then echo "recipe: $dir is finished (result.json)"; continue; fi
    if [ "$init" = bert ]; then
      if [ -z "$encoders" ]; then
        pretrain --no-setup --kinds "$kind" --out "$out/mlm-seed$seed" --config "$mlm_config" --set "seed=$seed" "${overrides[@]}"
        encoder_of[$kind]=$out/mlm-seed$seed/$kind/encoder.ckpt
      fi
      start_from=(--set "init_from=${encoder_of[$kind]}")
    fi
    start=$SECONDS
    train "$dir" --config "$config" --set "seed=$seed" "${overrides[@]}" --set "model.attention.encoder.kind=$kind" "${start_from[@]}"
    "$hnas" test "$dir"
    echo "recipe: $dir trained and tested in $((SECONDS - start)) s" | tee -a "$out/wall_times.txt"
  done
  # Lead-8: the first 8 words of each test article, scored as the runs are (ROUGE-1.5.5 -m).
  awk '{ line = ""; for (i = 1; i <= 8 && i <= NF; i++) line = line (i > 1 ? " " : "") $i; print line }' "$articles" \
    >"$out/lead8.txt"
  "$hnas" rouge --hyp "$out/lead8.txt" --ref "$references" --stem --json >"$out/lead8.rouge.json"
  python3 scripts/summarize.py recipe "$out" "$init" "$seed" "${kind_list[@]}"
}

finetune() {
  local seeds=6 kinds="lnas dnas hnas" scratch_kinds="lnas dnas hnas" tasks="headline_match sotu_era" bert=""
  local bert_kinds="lnas hnas dnas" encoders="data/pretrained/pretrain_{kind}.ckpt"
  local tokenizer=data/pretrained/tokenizer.model prediction="" out=runs/finetune
  options "seeds kinds scratch-kinds encoders tokenizer tasks bert bert-kinds prediction out" "" 0 "$@"
  [ -x "$hnas" ] || { echo "recipe.sh finetune: $hnas is missing; run scripts/setup.sh first" >&2; exit 1; }
  [ -n "$prediction" ] || die "state what the runs should show with --prediction before they run"
  python3 data/gigaword/prepare_data.py --if-missing
  mkdir -p "$out"
  local kind task group
  for kind in $kinds; do
    [ -f "${encoders//\{kind\}/$kind}" ] || die "no encoder ${encoders//\{kind\}/$kind} for kind $kind (--encoders $encoders)"
  done
  [ -z "$scratch_kinds" ] || [ -f "$tokenizer" ] || die "no tokenizer $tokenizer for the scratch arms"
  # The arms, as hnas sweep --list settings without their learning rates; the BERT arms in bf16.
  local groups=small shape=()
  if [ -n "$bert" ]; then
    import_bert "$bert" "$out/bert.ckpt"
    mapfile -t shape < <(bert_shape "$bert" "$out/bert.ckpt" d_model heads ffn_dim encoder_layers norm max_positions \
      layer_norm_eps)
    groups="small bert"
  fi
  python3 - "$out" "$kinds" "$scratch_kinds" "$encoders" "$tokenizer" "$bert_kinds" ${shape[@]+"${shape[@]}"} <<'PY'
import json, sys
out, kinds, scratch_kinds, encoders, tokenizer, bert_kinds = sys.argv[1:7]
def value(text):
    try:
        return json.loads(text)
    except ValueError:
        return text
shape = {key: value(text) for key, _, text in (setting.partition("=") for setting in sys.argv[7:])}
def kind_set(kind, hybrid_init=None):  # hnas's u starts at hybrid_init, near the softmax BERT was pretrained with
    return {"model.attention.encoder.kind": kind, **({"model.attention.encoder.hybrid_init": hybrid_init}
                                                     if kind == "hnas" and hybrid_init is not None else {})}
small = [{"name": f"pretrained_{kind}", "set": {**kind_set(kind), "init_from": encoders.replace("{kind}", kind)}}
         for kind in kinds.split()]
small += [{"name": f"scratch_{kind}", "set": {**kind_set(kind), "init_from": "", "tokenizer.model": tokenizer}}
          for kind in scratch_kinds.split()]
json.dump(small, open(f"{out}/arms_small.json", "w"), indent=1)
if shape:
    json.dump([{"name": f"bert_{kind}", "set": {**shape, "train.precision": "bf16", **kind_set(kind, 0.1)}}
               for kind in bert_kinds.split()], open(f"{out}/arms_bert.json", "w"), indent=1)
PY
  local rates finals
  for task in $tasks; do
    local sweep=(--config "configs/finetune_$task.json" --parallel 2 --set "test.file=data/finetune/$task.test.tsv")
    finals=()
    for group in $groups; do
      rates="[0.0003,0.001,0.003]"
      [ "$group" = small ] || rates="[0.00003,0.0001,0.0003]"
      "$hnas" sweep "${sweep[@]}" --list "$out/arms_$group.json" --grid "train.learning_rate=$rates" --seeds 1 \
        --out "$out/$task/pilot_$group"
      scripts/sweep.py --choose "$out/$task/pilot_$group" "$out/$task/chosen_$group" >/dev/null
      # One final sweep per group (a group added later, as --bert, runs beside the others), one comparison of all.
      "$hnas" sweep "${sweep[@]}" --list "$out/$task/chosen_$group/settings.json" --seeds "$seeds" \
        --out "$out/$task/final_$group" --prediction "$prediction"
      finals+=("$out/$task/final_$group")
    done
    "$hnas" compare "${finals[@]}" --out "$out/$task"
  done
  # shellcheck disable=SC2086 # the tasks are words
  HNAS=$hnas python3 scripts/summarize.py finetune "$out" $tasks | tee "$out/results.md"
}

decoding() {
  local checkpoint=${1:?usage: scripts/recipe.sh decoding CHECKPOINT [OUT] [options]}
  shift
  local out beam=4 length_penalty="0.0 0.5 1.0 1.5 2.0 3.0" no_repeat_ngram="0 2 3" min_len="1 4 6"
  out=$(dirname "$checkpoint")/decoding
  if (($#)) && [[ $1 != --* ]]; then out=$1; shift; fi
  options "beam length-penalty no-repeat-ngram min-len" "" 0 "$@"
  mkdir -p "$out"
  local penalty ngram least name
  for penalty in $length_penalty; do
    for ngram in $no_repeat_ngram; do
      for least in $min_len; do
        name="beam${beam}_lp${penalty}_nr${ngram}_min${least}"
        [ -f "$out/$name.json" ] && continue
        "$hnas" eval --checkpoint "$checkpoint" --articles data/gigaword/valid_1k/valid.article.filter.txt \
          --references data/gigaword/valid_1k/valid.title.filter.txt --beam "$beam" --length-penalty "$penalty" \
          --no-repeat-ngram "$ngram" --min-len "$least" --hypotheses "$out/$name.txt" --report "$out/$name.json.part" >/dev/null
        mv "$out/$name.json.part" "$out/$name.json"
      done
    done
  done
  python3 scripts/summarize.py decoding "$out"
}

analyses() {
  local out=${1:-docs/analyses} kind run
  mkdir -p "$out"
  # analysis PLOT NAME ARGS…: hnas ARGS… --output OUT/NAME.json, then plot_analysis.py PLOT of it into OUT/NAME.png
  analysis() { "$hnas" "${@:3}" --output "$out/$2.json" &&
    /usr/bin/python3 scripts/plot_analysis.py "$1" "$out/$2.json" --out "$out/$2.png"; }
  for kind in lnas dnas hnas; do
    run=runs/gigaword_tiny_$kind
    if [ ! -f "$run/best.ckpt" ]; then
      scripts/setup.sh
      train "$run" --config configs/gigaword_tiny.json --set "model.attention.encoder.kind=$kind"
    fi
    "$hnas" eval --checkpoint "$run/best.ckpt" --articles "$articles" --references "$references" --beam 4 \
      --length-penalty 1.0 --max-len 30 --min-len 1 --no-repeat-ngram 0 --bootstrap 1000 \
      --hypotheses "$out/test_headlines_$kind.txt" --report "$out/eval_$kind.json"
    analysis explain-away "explain_away_$kind" analyze explain-away --checkpoint "$run/best.ckpt" \
      --input data/gigaword/valid_1k/valid.article.filter.txt
  done
  analysis hybrid hybrid_weights analyze hybrid --run runs/gigaword_tiny_hnas
  analysis toy mode_collapse_500_50 toy mode-collapse
  analysis toy mode_collapse_balanced toy mode-collapse --n0 225 --n1 225
  analysis centre-distance centre_distance toy centre-distance
}

command=${1:-}
case "$command" in
  gigaword | pretrain | finetune | decoding | analyses) shift; "$command" "$@" ;;
  *) echo "usage: scripts/recipe.sh gigaword|pretrain|finetune|decoding|analyses [options] (see the top of the script)" >&2
     exit 2 ;;
esac
