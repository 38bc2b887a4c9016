#!/usr/bin/env bash
# The papers' recipes on the bundled data, one subcommand each; rerunning any of them continues where an
# interrupted run stopped and skips what is finished. Runs $HNAS, by default build/hnas (gigaword and
# pretrain run scripts/setup.sh first unless --no-setup; the others need it built).
#
#   scripts/recipe.sh gigaword [--kinds lnas,dnas,hnas] [--init bert|random] [--encoders PATTERN] [--bert DIR]
#                              [--out DIR] [--seed S] [--mlm-config F] [--config F] [--set key=value …] [--no-setup]
#     per encoder kind (docs/main_job.md): 1. masked-LM pretraining on all bundled text that is not test or
#     validation data (`pretrain`, --mlm-config default configs/pretrain.json); --encoders PATTERN skips it and
#     starts from encoders already pretrained ({kind} replaced by the kind: data/pretrained/pretrain_{kind}.ckpt
#     are the published ones); 2. ⟨BERT,BERT⟩: encoder and decoder start from that encoder (cross-attention
#     fresh) and train on the bundled article/headline pairs (--config, default configs/gigaword_recipe.json);
#     --init random skips step 1 (paper 000 Table 2's ⟨Random,Random⟩); --bert DIR starts instead from a
#     Hugging Face BERT folder (model.safetensors, config.json, vocab.txt; scripts/setup_peers.sh links
#     all-MiniLM-L6-v2 at ~/.cache/hnas-peers/minilm) imported by hnas import-bert, the model taking its shape
#     and WordPiece vocabulary; 3. `hnas test`: beam search on the Gigaword test set with the config's decoding
#     settings (chosen on the validation pairs), ROUGE-1.5.5 -m. Ends with each kind's test ROUGE beside the
#     lead-8 baseline and the first ten test headlines (OUT/summary.md). --set applies to both stages. Runs:
#     OUT/mlm-seed<S>/<kind> and OUT/headline_<kind>-<bert|random|hfbert>-seed<S> (default OUT runs/recipe_gigaword).
#
#   scripts/recipe.sh pretrain [--kinds hnas,lnas,dnas] [--out DIR] [--config F] [--set key=value …] [--no-setup]
#     the pretraining recipe (configs/pretrain.json, docs/pretraining.md) per kind: masked-LM + sentence-order
#     pretraining into OUT/<kind> (default OUT runs/pretrain), the encoder as it ended without optimizer moments
#     (OUT/<kind>/encoder.ckpt, what init_from starts from; data/pretrained/ keeps the published ones), then
#     the accuracy against minutes of every run under OUT (scripts/summarize.py pretrain).
#
#   scripts/recipe.sh finetune --prediction TEXT [--seeds N] [--kinds "lnas dnas hnas"] [--scratch-kinds "…"]
#                              [--encoders PATTERN] [--tokenizer FILE] [--tasks "headline_match sotu_era"]
#                              [--bert DIR] [--bert-kinds "lnas hnas dnas"] [--out DIR]
#     fine-tuning measured (docs/finetune.md) on data/finetune/'s two tasks, arms over N seeds (default 6):
#     pretrained_<kind> (the encoder PATTERN names, default data/pretrained/pretrain_{kind}.ckpt), scratch_<kind>
#     (the same model from random weights with FILE's tokenizer, default data/pretrained/tokenizer.model) and,
#     with --bert, bert_<kind> (that BERT fine-tuned as trained, lnas, or switched to hnas with u0 0.1 or dnas).
#     Each arm's rate is chosen on validation (seed 1; small encoders 3e-4, 1e-3, 3e-3, BERT 3e-5, 1e-4, 3e-4),
#     then every arm runs at its rate and is scored on the test split; TEXT, what the runs should show, is kept
#     in each final sweep. Runs under OUT (default runs/finetune); the tables in OUT/results.md.
#
#   scripts/recipe.sh decoding CHECKPOINT [OUT] [--beam B] [--length-penalty "0.6 1.0 …"] [--no-repeat-ngram "0 2 3"]
#                              [--min-len "1 4"]
#     a headline model's decoding settings chosen on the validation pairs, never on test: beam search over the
#     grid, each setting scored with ROUGE-1.5.5 -m F1 on data/gigaword/valid_1k (about 7 s each at d 128,
#     1 thread), sorted by the mean of ROUGE-1, -2 and -L (OUT/decoding_grid.md; OUT default CHECKPOINT's
#     folder/decoding).
#
#   scripts/recipe.sh analyses [OUT]
#     the papers' analyses (README "Reproducing the papers' analyses") into OUT (default docs/analyses): the
#     tiny config trained with each kind when runs/gigaword_tiny_<kind> is missing, then per run test ROUGE
#     (hnas eval), the explaining-away sums, the hybrid weights over training, the mode-collapse toy and
#     Eq. 11-12, each with its plot (Debian's /usr/bin/python3 with python3-matplotlib).
set -euo pipefail
cd "$(dirname "$0")/.."

hnas=${HNAS:-build/hnas}
articles=data/gigaword/test_1951/input.txt
references=data/gigaword/test_1951/task1_ref0.txt
die() { echo "recipe.sh $command: $*" >&2; exit 2; }

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
  local kinds=hnas out=runs/pretrain config=configs/pretrain.json setup=1 overrides=()
  while (($#)); do
    case "$1" in
      --kinds) kinds=$2; shift 2 ;;
      --out) out=$2; shift 2 ;;
      --config) config=$2; shift 2 ;;
      --set) overrides+=(--set "$2"); shift 2 ;;
      --no-setup) setup=0; shift ;;
      *) die "unknown argument '$1' (see the comment at the top of the script)" ;;
    esac
  done
  if ((setup)); then scripts/setup.sh; fi
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
  local encoders="" config=configs/gigaword_recipe.json setup=1 overrides=()
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
      *) die "unknown argument '$1' (see the comment at the top of the script)" ;;
    esac
  done
  [[ $init =~ ^(bert|random|hfbert)$ ]] || die "--init must be bert or random, not '$init'"
  [ -z "$encoders" ] || [ "$init" = bert ] || die "--encoders starts ⟨BERT,BERT⟩ from them; it cannot go with --init $init or --bert"
  local kind start dir kind_list
  IFS=, read -r -a kind_list <<<"$kinds"
  declare -A encoder_of  # kind → the encoder its ⟨BERT,BERT⟩ run starts from
  for kind in "${kind_list[@]}"; do
    encoder_of[$kind]=${encoders//\{kind\}/$kind}
    [ -z "$encoders" ] || [ -f "${encoder_of[$kind]}" ] || die "--encoders: no pretrained encoder for $kind at ${encoder_of[$kind]}"
  done
  if ((setup)); then scripts/setup.sh; fi
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
  while (($#)); do
    case "$1" in
      --seeds) seeds=$2; shift 2 ;;
      --kinds) kinds=$2; shift 2 ;;
      --scratch-kinds) scratch_kinds=$2; shift 2 ;;
      --encoders) encoders=$2; shift 2 ;;
      --tokenizer) tokenizer=$2; shift 2 ;;
      --tasks) tasks=$2; shift 2 ;;
      --bert) bert=$2; shift 2 ;;
      --bert-kinds) bert_kinds=$2; shift 2 ;;
      --prediction) prediction=$2; shift 2 ;;
      --out) out=$2; shift 2 ;;
      *) die "unknown argument $1" ;;
    esac
  done
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
  local out beam=4 penalties="0.0 0.5 1.0 1.5 2.0 3.0" ngrams="0 2 3" min_lengths="1 4 6"
  out=$(dirname "$checkpoint")/decoding
  if (($#)) && [[ $1 != --* ]]; then out=$1; shift; fi
  while (($#)); do
    case "$1" in
      --beam) beam=$2; shift 2 ;;
      --length-penalty) penalties=$2; shift 2 ;;
      --no-repeat-ngram) ngrams=$2; shift 2 ;;
      --min-len) min_lengths=$2; shift 2 ;;
      *) die "unknown argument '$1'" ;;
    esac
  done
  mkdir -p "$out"
  local penalty ngram min_len name
  for penalty in $penalties; do
    for ngram in $ngrams; do
      for min_len in $min_lengths; do
        name="beam${beam}_lp${penalty}_nr${ngram}_min${min_len}"
        [ -f "$out/$name.json" ] && continue
        "$hnas" eval --checkpoint "$checkpoint" --articles data/gigaword/valid_1k/valid.article.filter.txt \
          --references data/gigaword/valid_1k/valid.title.filter.txt --beam "$beam" --length-penalty "$penalty" \
          --no-repeat-ngram "$ngram" --min-len "$min_len" --hypotheses "$out/$name.txt" --report "$out/$name.json.part" >/dev/null
        mv "$out/$name.json.part" "$out/$name.json"
      done
    done
  done
  python3 scripts/summarize.py decoding "$out"
}

analyses() {
  local out=${1:-docs/analyses} kind run
  mkdir -p "$out"
  plot() { /usr/bin/python3 scripts/plot_analysis.py "$@"; }
  for kind in lnas dnas hnas; do
    run=runs/gigaword_tiny_$kind
    if [ ! -f "$run/best.ckpt" ]; then
      scripts/setup.sh
      train "$run" --config configs/gigaword_tiny.json --set "model.attention.encoder.kind=$kind"
    fi
    "$hnas" eval --checkpoint "$run/best.ckpt" --articles "$articles" --references "$references" --beam 4 \
      --length-penalty 1.0 --max-len 30 --min-len 1 --no-repeat-ngram 0 --bootstrap 1000 \
      --hypotheses "$out/test_headlines_$kind.txt" --report "$out/eval_$kind.json"
    "$hnas" analyze explain-away --checkpoint "$run/best.ckpt" \
      --input data/gigaword/valid_1k/valid.article.filter.txt --output "$out/explain_away_$kind.json"
    plot explain-away "$out/explain_away_$kind.json" --out "$out/explain_away_$kind.png"
  done
  "$hnas" analyze hybrid --run runs/gigaword_tiny_hnas --output "$out/hybrid_weights.json"
  plot hybrid "$out/hybrid_weights.json" --out "$out/hybrid_weights.png"
  "$hnas" toy mode-collapse --output "$out/mode_collapse_500_50.json"
  plot toy "$out/mode_collapse_500_50.json" --out "$out/mode_collapse_500_50.png"
  "$hnas" toy mode-collapse --n0 225 --n1 225 --output "$out/mode_collapse_balanced.json"
  plot toy "$out/mode_collapse_balanced.json" --out "$out/mode_collapse_balanced.png"
  "$hnas" toy centre-distance --output "$out/centre_distance.json"
  plot centre-distance "$out/centre_distance.json" --out "$out/centre_distance.png"
}

command=${1:-}
case "$command" in
  gigaword | pretrain | finetune | decoding | analyses) shift; "$command" "$@" ;;
  *) echo "usage: scripts/recipe.sh gigaword|pretrain|finetune|decoding|analyses [options] (see the top of the script)" >&2
     exit 2 ;;
esac
