#!/usr/bin/env bash
# Beam search of hnas beside its PyTorch peers (docs/performance.md, Decoding), side by side in one run:
#   1. without --checkpoint, `hnas train` makes a headline model on the bundled data (configs/gigaword.json,
#      the twin's shapes, --steps steps, batches of 64, learning rate 0.001, as scripts/bench_real.sh trains);
#   2. per round and beam, `hnas-bench decode` decodes the first --count test articles in `hnas decode`'s
#      batches in --precision and writes them with the model's parameters; then each peer decodes
#      the same batches with the same model, settings and search (scripts/torch_decode.py: cached keys and
#      values) and counts the best hypotheses equal to hnas's token for token. The peers:
#        torch113  Debian's PyTorch 1.13, eager, always in f32 (the column kept for continuity);
#        eager     PyTorch 2 eager,                                 } from scripts/setup_peers.sh's environments, in
#        compile   torch.compile (default mode, dynamic=None) of    } --precision (bf16: torch.autocast around
#                  the encoder and of one decoder step; the beam    }   the model's functions);
#                  search between them stays eager                  }
#        ipex      intel_extension_for_pytorch.optimize(model), the }
#                  model in eval mode                               }
#      the batch and cache sizes change, so torch.compile recompiles: the batches of the timed pass during
#      which it compiled a graph are reported apart, and its articles/s are those of the other batches.
# It prints a markdown table: articles/s (median of the rounds, [min–max]), hnas's speed against each peer,
# the generated tokens, how many best hypotheses are hnas's, peak RSS; then torch.compile's compiling batches.
# Options:
#   --checkpoint FILE  a headline checkpoint of hnas train with the twin's shapes (default: train one)
#   --steps N          training steps of the model made without --checkpoint (default 400)
#   --beams "A B"      beam sizes (default "1 4")
#   --count N          articles decoded (default 1951: all of data/gigaword/test_1951/input.txt)
#   --batch N          articles decoded together (default 32, hnas decode's default)
#   --rounds N         alternating rounds (default 3)
#   --threads N        threads for both frameworks (default 2)
#   --precision P      f32 (default) or bf16: hnas-bench decode's products (as `hnas decode --precision bf16`)
#                      and the PyTorch 2 peers' autocast; PyTorch 1.13 always decodes in f32, and in bf16
#                      "same best hypothesis" counts agreement, not identity
#   --peers "A B"      subset of "torch113 eager compile ipex" (default all); a PyTorch 2 peer whose venv or
#                      package is missing is skipped, saying why
#   --out DIR          where runs and JSON lines go (default a fresh temporary directory)
#   --no-build         use build/hnas and build/hnas-bench as they are
# Environment: HNAS_BUILD_DIR (default build), PYTHON (default /usr/bin/python3, Debian's, with torch),
# PEERS_TORCH_PYTHON and PEERS_IPEX_PYTHON (scripts/bench_common.sh's select_peers).
set -euo pipefail
cd "$(dirname "$0")/.."

checkpoint="" steps=400 beams="1 4" count=1951 batch=32 rounds=3 threads=2 out="" build=1 precision=f32
peers="torch113 eager compile ipex"
while (($#)); do
  case "$1" in
    --checkpoint) checkpoint=${2:?--checkpoint needs a value}; shift ;;
    --steps) steps=${2:?--steps needs a value}; shift ;;
    --beams) beams=${2:?--beams needs a value}; shift ;;
    --count) count=${2:?--count needs a value}; shift ;;
    --batch) batch=${2:?--batch needs a value}; shift ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift ;;
    --threads) threads=${2:?--threads needs a value}; shift ;;
    --precision) precision=${2:?--precision needs a value}; shift ;;
    --peers) peers=${2:?--peers needs a value}; shift ;;
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
[[ "$precision" == f32 || "$precision" == bf16 ]] || { echo "bench_decode: --precision must be f32 or bf16, got $precision" >&2; exit 2; }

python=${PYTHON:-/usr/bin/python3}
source scripts/bench_common.sh
select_peers bench_decode  # sets peers, torch_python, ipex_python and skipped ("peer: why", printed under the table)
build_dir=${HNAS_BUILD_DIR:-build}
if ((build)); then build_targets "$build_dir" hnas hnas-bench; fi
out=${out:-$(mktemp -d /tmp/bench_decode.XXXXXX)}
copy_binaries bench_decode "$build_dir" "$out" hnas hnas-bench
export OMP_NUM_THREADS=$threads
echo "bench_decode: $(OMP_NUM_THREADS="" nproc --all) cores, $threads threads; peers: ${peers:-none} in $precision;" \
  "output in $out" >&2

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
      --precision "$precision" --out "$out/beam$beam.sources" >>"$results" 2>"$out/hnas.log" \
      || { echo "bench_decode: hnas-bench decode failed; see $out/hnas.log" >&2; exit 1; }
    for peer in $peers; do
      peer_command "$peer" "$precision" scripts/torch_decode.py
      "${cmd[@]}" --sources "$out/beam$beam.sources" --threads "$threads" >>"$results" 2>"$out/$peer.log" \
        || { echo "bench_decode: the $peer twin failed; see $out/$peer.log" >&2; exit 1; }
    done
  done
done

printf '%s\n' ${skipped[@]+"${skipped[@]}"} >"$out/skipped.txt"
"$python" - "$results" "$out/skipped.txt" <<'EOF'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
skipped = [line.strip() for line in open(sys.argv[2]) if line.strip()]
for r in runs:
    r["who"] = "hnas" if r["impl"] == "hnas" else "torch113" if r["torch"].startswith("1.") else r["peer"]
    if r["who"] == "torch113" and not any("openblas" in library for library in r["blas"]):
        sys.exit(f"bench_decode: torch did not run on OpenBLAS ({r['blas']}); the comparison would be unfair")
titles = {"hnas": "hnas", "torch113": "PyTorch {torch}", "eager": "PyTorch {torch} eager", "compile": "torch.compile",
          "ipex": "IPEX {ipex}"}
order = [w for w in ["hnas", "torch113", "eager", "compile", "ipex"] if any(r["who"] == w for r in runs)]
def rate(r):  # torch.compile: the articles/s of the batches that compiled nothing
    return r.get("articles_per_s_without_compiling", r["articles_per_s"])
def spread(values, fmt="{:.1f}"):
    text = fmt.format(statistics.median(values))
    return text + f" [{fmt.format(min(values))}–{fmt.format(max(values))}]" if len(values) > 1 else text
print("| beam | run | precision | articles | articles/s | hnas speed / run's | generated tokens | same best hypothesis as hnas | "
      "peak RSS MiB |")
print("| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for beam in sorted({r["beam"] for r in runs}):
    hnas = [r for r in runs if r["beam"] == beam and r["who"] == "hnas"]
    for who in order:
        mine = [r for r in runs if r["beam"] == beam and r["who"] == who]
        if any("compiling_units" in r and "articles_per_s_without_compiling" not in r for r in mine):
            speed, ratio = spread([r["articles_per_s"] for r in mine]) + " (every batch compiled)", "–"
        else:
            ratio = spread([rate(h) / rate(r) for h, r in zip(hnas, mine)], "{:.2f}")
            speed = spread([rate(r) for r in mine]) + (" (without its compiling batches)" if "compiling_units" in mine[0] else "")
        same = f"{mine[-1]['same_as_hnas']}/{mine[-1]['articles']}" if who != "hnas" else "–"
        print(f"| {beam} | {titles[who].format(**mine[0])} | {mine[0].get('precision', 'f32')} | {mine[0]['articles']} | {speed} | "
              f"{ratio} | {mine[-1]['generated_tokens']} | {same} | {max(r['peak_rss_mib'] for r in mine):.0f} |")
compiled = [r for r in runs if "compiling_units" in r]
if compiled:
    print(f"\ntorch.compile (default mode, dynamic=None; config.cache_size_limit {compiled[0]['cache_size_limit']}) of the "
          "encoder and of one decoder step (the beam search stays eager): graphs compiled on the untimed first batch, "
          "and the batches of the timed pass during which it compiled more, left out of its articles/s above:\n")
    print("| beam | round | graphs compiled (warm-up / timed pass) | compiling batches (from 0) | their seconds | "
          "frames left eager | articles/s with them |")
    print("| ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    for beam in sorted({r["beam"] for r in compiled}):
        for round, r in enumerate((r for r in compiled if r["beam"] == beam), 1):
            shown = ", ".join(map(str, r["compiling_units"][:12])) + (" …" if len(r["compiling_units"]) > 12 else "")
            print(f"| {beam} | {round} | {r['graphs_before']} / {r['graphs']} | {len(r['compiling_units'])}: {shown} | "
                  f"{r['compiling_seconds']:.1f} | {r['frames_left_eager']} | {r['articles_per_s']:.1f} |")
for reason in skipped:
    print(f"Skipped {reason}.")
EOF
