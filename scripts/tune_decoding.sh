#!/usr/bin/env bash
# Chooses a headline model's decoding settings on the validation pairs, never on test:
# beam search over a grid of length penalty A, repeated-n-gram ban and minimum length, each setting
# scored with ROUGE-1.5.5 -m F1 on data/gigaword/valid_1k; prints the grid sorted by the mean of
# ROUGE-1, -2 and -L and writes it to OUT/decoding_grid.md and OUT/decoding_grid.json.
#   scripts/tune_decoding.sh CHECKPOINT [OUT] [--beam B] [--length-penalty "0.6 1.0 …"]
#                            [--no-repeat-ngram "0 2 3"] [--min-len "1 4"]
# OUT defaults to the checkpoint's folder/decoding; build/hnas must exist (scripts/setup.sh). Each
# setting takes about 7 s (d 128, 3 + 3 layers, 1,000 articles, 1 thread); finished ones are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

checkpoint=${1:?usage: scripts/tune_decoding.sh CHECKPOINT [OUT] [options]}
shift
out=$(dirname "$checkpoint")/decoding
if (($#)) && [[ $1 != --* ]]; then out=$1; shift; fi
beam=4
penalties="0.0 0.5 1.0 1.5 2.0 3.0"
ngrams="0 2 3"
min_lengths="1 4 6"
while (($#)); do
  case "$1" in
    --beam) beam=$2; shift 2 ;;
    --length-penalty) penalties=$2; shift 2 ;;
    --no-repeat-ngram) ngrams=$2; shift 2 ;;
    --min-len) min_lengths=$2; shift 2 ;;
    *) echo "tune_decoding.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
articles=data/gigaword/valid_1k/valid.article.filter.txt
references=data/gigaword/valid_1k/valid.title.filter.txt
mkdir -p "$out"
for penalty in $penalties; do
  for ngram in $ngrams; do
    for min_len in $min_lengths; do
      name="beam${beam}_lp${penalty}_nr${ngram}_min${min_len}"
      [ -f "$out/$name.json" ] && continue
      build/hnas eval --checkpoint "$checkpoint" --articles "$articles" --references "$references" \
        --beam "$beam" --length-penalty "$penalty" --no-repeat-ngram "$ngram" --min-len "$min_len" \
        --hypotheses "$out/$name.txt" --report "$out/$name.json.part" >/dev/null
      mv "$out/$name.json.part" "$out/$name.json"
    done
  done
done
/usr/bin/python3 - "$out" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
rows = []
for path in glob.glob(os.path.join(out, "beam*.json")):
    report = json.load(open(path))
    decoding, rouge = report["decoding"], report["rouge"]
    f1 = [100 * rouge[k]["f1"] for k in ("rouge-1", "rouge-2", "rouge-l")]
    hypotheses = [line.split() for line in open(path[:-len(".json")] + ".txt")]
    words = sum(map(len, hypotheses)) / max(len(hypotheses), 1)
    rows.append({"beam": decoding["beam"], "length_penalty": decoding["length_penalty"],
                 "no_repeat_ngram": decoding["no_repeat_ngram"], "min_length": decoding["min_length"],
                 "rouge_1": f1[0], "rouge_2": f1[1], "rouge_l": f1[2], "mean": sum(f1) / 3, "words": words})
rows.sort(key=lambda row: -row["mean"])
json.dump(rows, open(os.path.join(out, "decoding_grid.json"), "w"), indent=1)
lines = ["| beam | length penalty | no-repeat n-gram | min length | ROUGE-1 | ROUGE-2 | ROUGE-L | mean | words |",
         "|---|---|---|---|---|---|---|---|---|"]
lines += [f"| {r['beam']} | {r['length_penalty']} | {r['no_repeat_ngram']} | {r['min_length']} | {r['rouge_1']:.2f} | "
          f"{r['rouge_2']:.2f} | {r['rouge_l']:.2f} | {r['mean']:.2f} | {r['words']:.1f} |" for r in rows]
text = "\n".join(lines) + "\n"
open(os.path.join(out, "decoding_grid.md"), "w").write(text)
print(text, end="")
EOF
