#!/usr/bin/env bash
# Beam search of hnas beside its PyTorch twin (docs/performance.md, Decoding), side by side in one run:
#   1. without --checkpoint, `hnas train` makes a headline model on the bundled data (configs/gigaword.json,
#      the twin's shapes, --steps steps, batches of 64, learning rate 0.001, as scripts/bench_real.sh trains);
#   2. per round and beam, `hnas-bench decode` decodes the first --count test articles in `hnas decode`'s
#      batches and writes them with the model's parameters; scripts/torch_decode.py decodes the same batches
#      with the same model, settings and search (cached keys and values), in alternation.
# It prints a markdown table: articles/s of both (median of the rounds, [min–max]), the speed ratio, the
# generated tokens and how many best hypotheses are the same token for token.
# Options:
#   --checkpoint FILE  a headline checkpoint of hnas train with the twin's shapes (default: train one)
#   --steps N          training steps of the model made without --checkpoint (default 400)
#   --beams "A B"      beam sizes (default "1 4")
#   --count N          articles decoded (default 1951: all of data/gigaword/test_1951/input.txt)
#   --batch N          articles decoded together (default 32, hnas decode's default)
#   --rounds N         alternating rounds (default 3)
#   --threads N        threads for both frameworks (default 2)
#   --out DIR          where runs and JSON lines go (default a fresh temporary directory)
#   --no-build         use build/hnas and build/hnas-bench as they are
# Environment: HNAS_BUILD_DIR (default build), PYTHON (default /usr/bin/python3, Debian's, with torch).
set -euo pipefail
cd "$(dirname "$0")/.."

checkpoint="" steps=400 beams="1 4" count=1951 batch=32 rounds=3 threads=2 out="" build=1
while (($#)); do
  case "$1" in
    --checkpoint) checkpoint=${2:?--checkpoint needs a value}; shift ;;
    --steps) steps=${2:?--steps needs a value}; shift ;;
    --beams) beams=${2:?--beams needs a value}; shift ;;
    --count) count=${2:?--count needs a value}; shift ;;
    --batch) batch=${2:?--batch needs a value}; shift ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift ;;
    --threads) threads=${2:?--threads needs a value}; shift ;;
    --out) out=${2:?--out needs a value}; shift ;;
    --no-build) build=0 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "bench_decode: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
for value in "$steps" "$count" "$batch" "$rounds" "$threads" $beams; do
  [[ "$value" =~ ^[1-9][0-9]*$ ]] || { echo "bench_decode: '$value' is not a positive integer" >&2; exit 2; }
done
[ -z "$checkpoint" ] || [ -f "$checkpoint" ] || { echo "bench_decode: --checkpoint $checkpoint is not a file" >&2; exit 2; }

python=${PYTHON:-/usr/bin/python3}
source scripts/bench_common.sh
require_torch bench_decode
build_dir=${HNAS_BUILD_DIR:-build}
if ((build)); then build_targets "$build_dir" hnas hnas-bench; fi
out=${out:-$(mktemp -d /tmp/bench_decode.XXXXXX)}
copy_binaries bench_decode "$build_dir" "$out" hnas hnas-bench
export OMP_NUM_THREADS=$threads
echo "bench_decode: $(OMP_NUM_THREADS="" nproc --all) cores, $threads threads; output in $out" >&2

if [ -z "$checkpoint" ]; then
  echo "bench_decode: training a headline model for $steps steps" >&2
  rm -rf "${out:?}/run"
  "$out/bin/hnas" train --config configs/gigaword.json --out "$out/run" \
    --set train.steps="$steps" data.batch_sentences=64 train.learning_rate=0.001 >"$out/train.log" 2>&1 \
    || { echo "bench_decode: training failed; see $out/train.log" >&2; exit 1; }
  checkpoint=$(ls -t "$out"/run/checkpoints/*.ckpt | head -n 1)
fi

results="$out/results.jsonl"
: >"$results"
for round in $(seq "$rounds"); do
  for beam in $beams; do
    echo "bench_decode: round $round, beam $beam" >&2
    "$out/bin/hnas-bench" decode --checkpoint "$checkpoint" --count "$count" --batch "$batch" --beam "$beam" \
      --out "$out/beam$beam.sources" >>"$results" 2>"$out/hnas.log" \
      || { echo "bench_decode: hnas-bench decode failed; see $out/hnas.log" >&2; exit 1; }
    "$python" scripts/torch_decode.py --sources "$out/beam$beam.sources" --threads "$threads" >>"$results" \
      2>"$out/torch.log" || { echo "bench_decode: the torch twin failed; see $out/torch.log" >&2; exit 1; }
  done
done

"$python" - "$results" <<'EOF'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
for r in runs:
    if r["impl"] == "torch" and not any("openblas" in library for library in r["blas"]):
        sys.exit(f"bench_decode: torch did not run on OpenBLAS ({r['blas']}); the comparison would be unfair")
print("| beam | articles | hnas articles/s | torch articles/s | speed / torch | hnas tokens | torch tokens | "
      "same best hypothesis | peak RSS hnas / torch MiB |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for beam in sorted({r["beam"] for r in runs}):
    hnas = [r for r in runs if r["beam"] == beam and r["impl"] == "hnas"]
    torch = [r for r in runs if r["beam"] == beam and r["impl"] == "torch"]
    def spread(values):
        return f"{statistics.median(values):.1f} [{min(values):.1f}–{max(values):.1f}]"
    ratios = [h["articles_per_s"] / t["articles_per_s"] for h, t in zip(hnas, torch)]
    print(f"| {beam} | {hnas[0]['articles']} | {spread([r['articles_per_s'] for r in hnas])} | "
          f"{spread([r['articles_per_s'] for r in torch])} | {statistics.median(ratios):.2f} [{min(ratios):.2f}–{max(ratios):.2f}] | "
          f"{hnas[-1]['generated_tokens']} | {torch[-1]['generated_tokens']} | {torch[-1]['same_as_hnas']}/{torch[-1]['articles']} | "
          f"{max(r['peak_rss_mib'] for r in hnas):.0f} / {max(r['peak_rss_mib'] for r in torch):.0f} |")
EOF
