#!/usr/bin/env bash
# Issue 15's demonstration: pretrain a small BERT-style encoder with each attention kind (masked LM and
# sentence order on the bundled Gigaword and State of the Union text), fine-tune each on the two
# bundled classification tasks (data/finetune/: headline_match, sentence pairs; sotu_era, single
# sentences) over several seeds, score the best checkpoint of every run on the test split, and print a
# table of mean ± standard error beside the majority-class baseline.
#
#   scripts/finetune_demo.sh [--seeds N] [--kinds "lnas dnas hnas"] [--tasks "headline_match sotu_era"]
#
# --kinds takes any registered attention kinds (lnas, dnas, hnas, sinkhorn, dnas_causal, nap); each is set
# in configs/finetune_pretrain.json and configs/finetune_<task>.json with --set, the fine-tuning runs
# starting from the pretrained encoder of their kind.
#
# Runs go to runs/finetune/ (a finished pretraining or fine-tuning run is reused); the table goes to
# standard output and to runs/finetune/results.md. Needs build/hnas (scripts/setup.sh builds it).
set -euo pipefail
cd "$(dirname "$0")/.."

seeds=5 kinds="lnas dnas hnas" tasks="headline_match sotu_era"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --seeds) seeds="$2"; shift 2 ;;
        --kinds) kinds="$2"; shift 2 ;;
        --tasks) tasks="$2"; shift 2 ;;
        *) echo "finetune_demo: unknown argument $1" >&2; exit 2 ;;
    esac
done
[[ -x build/hnas ]] || { echo "finetune_demo: build/hnas is missing; run scripts/setup.sh first" >&2; exit 1; }
python3 scripts/prepare_data.py --if-missing
mkdir -p runs/finetune

for kind in $kinds; do
    run="runs/finetune/pretrain_$kind"
    if [[ ! -f "$run/best.ckpt" ]]; then
        rm -rf "$run"
        build/hnas train --config configs/finetune_pretrain.json --set "model.attention.encoder.kind=$kind" --out "$run" \
            > "$run.log" 2>&1
    fi
    echo "pretrained $kind: $(grep 'validation at' "$run.log" | tail -1 | sed 's/.*validation at/validation at/')"
done

for task in $tasks; do
    for kind in $kinds; do
        for seed in $(seq 1 "$seeds"); do
            run="runs/finetune/${task}_${kind}_s$seed"
            if [[ ! -f "$run/best.ckpt.eval.json" ]]; then
                rm -rf "$run"
                build/hnas train --config "configs/finetune_$task.json" --set "model.attention.encoder.kind=$kind" \
                    --set "init_from=runs/finetune/pretrain_$kind/best.ckpt" --out "$run" --set "seed=$seed" > "$run.log" 2>&1
                build/hnas eval --checkpoint "$run/best.ckpt" --input "data/finetune/$task.test.tsv" > /dev/null 2>> "$run.log"
            fi
            echo "$task $kind seed $seed: $(python3 -c "import json,sys; m=json.load(open(sys.argv[1]))['metrics']; print(f\"test accuracy {100*m['accuracy']:.2f}\")" "$run/best.ckpt.eval.json")"
        done
    done
done

python3 - "$seeds" "$kinds" "$tasks" <<'PY' | tee runs/finetune/results.md
import json, math, sys
seeds, kinds, tasks = int(sys.argv[1]), sys.argv[2].split(), sys.argv[3].split()
print(f"Test-split scores of the best validation checkpoint, mean ± standard error over {seeds} seeds (in %).\n")
print("| task | kind | accuracy | MCC | F1 (pairs) | majority-class baseline |")
print("| --- | --- | --- | --- | --- | --- |")
def mean_se(values):
    m = sum(values) / len(values)
    if len(values) < 2:
        return m, float("nan")
    var = sum((v - m) ** 2 for v in values) / (len(values) - 1)
    return m, math.sqrt(var / len(values))
for task in tasks:
    for kind in kinds:
        reports = [json.load(open(f"runs/finetune/{task}_{kind}_s{s}/best.ckpt.eval.json"))["metrics"] for s in range(1, seeds + 1)]
        cells = []
        for key in ("accuracy", "mcc", "f1"):
            if key in reports[0]:
                m, se = mean_se([100 * r[key] for r in reports])
                cells.append(f"{m:.2f} ± {se:.2f}")
            else:
                cells.append("—")
        baseline = 100 * reports[0]["majority_baseline_accuracy"]
        print(f"| {task} | {kind} | {cells[0]} | {cells[1]} | {cells[2]} | {baseline:.2f} ({reports[0]['majority_class']}) |")
PY
