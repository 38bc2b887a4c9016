#!/usr/bin/env bash
# Fine-tuning, measured: on the two bundled classification tasks (data/finetune/: headline_match,
# sentence pairs; sotu_era, single sentences), each of these arms over several seeds —
#   pretrained_<kind>  the encoder pretrained with that kind (default the shipped data/pretrained/pretrain_<kind>.ckpt:
#                      configs/pretrain.json, d 128, 3 pre-norm layers), fine-tuned with the same kind
#   scratch_<kind>     the same model and tokenizer (data/pretrained/tokenizer.model) from random weights
#   bert_<kind>        with --bert: a real pretrained BERT (Hugging Face folder) imported by hnas import-bert,
#                      fine-tuned with its attention as trained (lnas) or switched to hnas (u0 0.1, so it
#                      starts close to the softmax it was pretrained with) or dnas
# Each arm's learning rate is chosen on the validation split (one seed per rate, scripts/choose_rates.py:
# small encoders from 3e-4, 1e-3, 3e-3; the real BERT from 3e-5, 1e-4, 3e-4), then every arm runs
# --seeds seeds at its rate and is scored on the test split; hnas compare gives mean ± standard error,
# the paired permutation test over seeds and the paired bootstrap over test examples.
#
#   scripts/finetune_demo.sh [--seeds N] [--kinds "lnas dnas hnas"] [--scratch-kinds "lnas dnas hnas"]
#                            [--encoders PATTERN] [--tokenizer FILE] [--tasks "headline_match sotu_era"]
#                            [--bert DIR] [--bert-kinds "lnas hnas dnas"] [--prediction TEXT] [--out DIR]
#
# PATTERN names each kind's encoder with {kind} in it: default data/pretrained/pretrain_{kind}.ckpt
# (scripts/pretrain.sh writes runs/pretrain/{kind}/encoder.ckpt); FILE is their tokenizer, for the scratch arms.
# DIR holds model.safetensors, config.json and vocab.txt (scripts/setup_peers.sh links all-MiniLM-L6-v2 at
# ~/.cache/hnas-peers/minilm). Runs go to --out (default runs/finetune; finished runs are reused, so a stopped
# script continues where it was); the table goes to standard output and OUT/results.md. TEXT is what the runs
# are expected to show, stated before they start (kept in each final sweep's sweep.json). Runs $HNAS, by
# default build/hnas (scripts/setup.sh builds it); a copy keeps a long run apart from rebuilds.
set -euo pipefail
cd "$(dirname "$0")/.."

seeds=6 kinds="lnas dnas hnas" scratch_kinds="lnas dnas hnas" tasks="headline_match sotu_era" bert="" bert_kinds="lnas hnas dnas"
encoders="data/pretrained/pretrain_{kind}.ckpt" tokenizer="data/pretrained/tokenizer.model" prediction="" out=runs/finetune
small_rates="[0.0003,0.001,0.003]" bert_rates="[0.00003,0.0001,0.0003]"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --seeds) seeds="$2"; shift 2 ;;
        --kinds) kinds="$2"; shift 2 ;;
        --scratch-kinds) scratch_kinds="$2"; shift 2 ;;
        --encoders) encoders="$2"; shift 2 ;;
        --tokenizer) tokenizer="$2"; shift 2 ;;
        --tasks) tasks="$2"; shift 2 ;;
        --bert) bert="$2"; shift 2 ;;
        --bert-kinds) bert_kinds="$2"; shift 2 ;;
        --prediction) prediction="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        *) echo "finetune_demo: unknown argument $1" >&2; exit 2 ;;
    esac
done
hnas=${HNAS:-build/hnas}
[[ -x $hnas ]] || { echo "finetune_demo: $hnas is missing; run scripts/setup.sh first" >&2; exit 1; }
export HNAS=$hnas
[[ -n $prediction ]] || { echo "finetune_demo: state what the runs should show with --prediction before they run" >&2; exit 2; }
python3 data/gigaword/prepare_data.py --if-missing
mkdir -p "$out"

# 1. The encoders, one per kind, and their tokenizer.
for kind in $kinds; do
    encoder=${encoders//\{kind\}/$kind}
    [[ -f $encoder ]] || { echo "finetune_demo: no encoder $encoder for kind $kind (--encoders $encoders)" >&2; exit 1; }
done
[[ -z $scratch_kinds || -f $tokenizer ]] || { echo "finetune_demo: no tokenizer $tokenizer for the scratch arms" >&2; exit 1; }

# 2. The arms, as hnas sweep --list settings (without their learning rates).
if [[ -n "$bert" ]]; then
    for file in model.safetensors config.json vocab.txt; do
        [[ -f "$bert/$file" ]] || { echo "finetune_demo: --bert $bert has no $file" >&2; exit 1; }
    done
    [[ -f "$out/bert.ckpt" ]] || "$hnas" import-bert --weights "$bert/model.safetensors" --vocab "$bert/vocab.txt" \
        --config "$bert/config.json" --out "$out/bert.ckpt" > "$out/bert_import.log" 2>&1
fi
python3 - "$out" "$kinds" "$scratch_kinds" "$encoders" "$tokenizer" "$bert" "$bert_kinds" <<'PY'
import json, os, sys
out, kinds, scratch_kinds, encoders, tokenizer, bert, bert_kinds = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), \
    sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7].split()
def kind_set(kind, hybrid_init=None):
    s = {"model.attention.encoder.kind": kind}
    if kind == "hnas" and hybrid_init is not None:
        s["model.attention.encoder.hybrid_init"] = hybrid_init
    return s
small = [{"name": f"pretrained_{kind}", "set": {**kind_set(kind), "init_from": encoders.replace("{kind}", kind)}}
         for kind in kinds]
small += [{"name": f"scratch_{kind}", "set": {**kind_set(kind), "init_from": "", "tokenizer.model": tokenizer}}
          for kind in scratch_kinds]
json.dump(small, open(f"{out}/arms_small.json", "w"), indent=1)
if bert:
    c = json.load(open(os.path.join(bert, "config.json")))
    shape = {"init_from": f"{out}/bert.ckpt", "model.d_model": c["hidden_size"], "model.heads": c["num_attention_heads"],
             "model.ffn_dim": c["intermediate_size"], "model.encoder_layers": c["num_hidden_layers"], "model.norm": "post",
             "model.max_positions": c["max_position_embeddings"], "model.layer_norm_eps": c["layer_norm_eps"],
             "tokenizer.type": "wordpiece", "tokenizer.model": os.path.join(bert, "vocab.txt"), "train.precision": "bf16"}
    arms = [{"name": f"bert_{kind}", "set": {**shape, **kind_set(kind, 0.1)}} for kind in bert_kinds]
    json.dump(arms, open(f"{out}/arms_bert.json", "w"), indent=1)
PY
groups="small"
[[ -n "$bert" ]] && groups="small bert"

for task in $tasks; do
    # 3. Each arm's learning rate: the best validation accuracy over its group's grid, seed 1.
    for group in $groups; do
        rates=$small_rates
        [[ $group == bert ]] && rates=$bert_rates
        "$hnas" sweep --config "configs/finetune_$task.json" --list "$out/arms_$group.json" \
            --grid "train.learning_rate=$rates" --seeds 1 --parallel 2 --out "$out/$task/pilot_$group" \
            --set "test.file=data/finetune/$task.test.tsv"
        python3 scripts/choose_rates.py "$out/$task/pilot_$group" "$out/$task/chosen_$group" > /dev/null
    done
    # 4. Every arm at its rate, over the seeds, scored on the test split, the prediction stated first; one final
    #    sweep per group (a group added later, as --bert, runs beside the others), then one comparison of all.
    finals=()
    for group in $groups; do
        "$hnas" sweep --config "configs/finetune_$task.json" --list "$out/$task/chosen_$group/settings.json" \
            --seeds "$seeds" --parallel 2 --out "$out/$task/final_$group" --set "test.file=data/finetune/$task.test.tsv" \
            --prediction "$prediction"
        finals+=("$out/$task/final_$group")
    done
    "$hnas" compare "${finals[@]}" --out "$out/$task"
done

python3 scripts/finetune_summary.py "$out" $tasks | tee "$out/results.md"
