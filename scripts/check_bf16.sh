#!/usr/bin/env bash
# bf16 against f32: trains the first N steps (default 500) of each tiny config twice, with f32 and with
# bf16 matmuls (train.precision), and compares the loss curves. The schedule is the config's own (the
# run stops early with --stop-after), both runs share one tokenizer (trained by the f32 run), and
# validation is skipped. Per config it prints the largest relative difference of the 50-step moving
# averages of the per-step losses (the criterion: below 1 %), the largest per-step difference, and
# each run's median training throughput (input tokens/s of a step, from metrics.jsonl).
#   scripts/check_bf16.sh [--steps N] [--window W] [--out DIR] [--no-build] [CONFIG[:KIND] ...]
# (KIND: the encoder self-attention, as --set model.attention.encoder.kind=KIND)
set -euo pipefail
cd "$(dirname "$0")/.."

steps=500
window=50
out=runs/check_bf16
build=1
configs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    -*) echo "check_bf16.sh: unknown option $1" >&2; exit 2 ;;
    *) configs+=("$1"); shift ;;
  esac
done
# Each run: a config, optionally with the encoder's attention kind after a colon.
[ ${#configs[@]} -gt 0 ] || configs=(configs/gigaword_tiny.json:lnas configs/gigaword_tiny.json:hnas configs/mlm_tiny.json)
if [ "$build" = 1 ]; then
  if [ ! -f build/CMakeCache.txt ]; then cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null; fi
  # Builds on shared machines take turns through /tmp/build.lock when flock exists.
  if command -v flock >/dev/null; then
    flock /tmp/build.lock nice cmake --build build -j "$(nproc)" --target hnas >/dev/null
  else
    cmake --build build -j "$(nproc)" --target hnas >/dev/null
  fi
fi
[ -x build/hnas ] || { echo "check_bf16: build/hnas is missing (build the hnas target or drop --no-build)" >&2; exit 1; }

# Cheap validation and checkpoints: a config's validation or checkpoint step inside the first N steps
# would only cost time, and neither changes the training stream.
cheap=(--set validation.every=0 --set validation.max_batches=1 --set checkpoint.every=1000000 --set train.log_every=1)

results=()
for run in "${configs[@]}"; do
  config=${run%%:*}
  kind=()
  name=$(basename "$config" .json)
  if [ "$run" != "$config" ]; then
    kind=(--set "model.attention.encoder.kind=${run#*:}")
    name="${name}_${run#*:}"
  fi
  rm -rf "$out/$name"
  mkdir -p "$out/$name"
  for precision in f32 bf16; do
    tokenizer=()
    if [ "$precision" = bf16 ]; then tokenizer=(--set "tokenizer.model=$out/$name/f32/tokenizer.model"); fi
    echo "== $name, $precision: $steps steps" >&2
    build/hnas train --config "$config" --out "$out/$name/$precision" --stop-after "$steps" \
      --set "train.precision=$precision" "${kind[@]}" "${cheap[@]}" "${tokenizer[@]}" >"$out/$name/$precision.log" 2>&1 ||
      { tail -20 "$out/$name/$precision.log" >&2; exit 1; }
  done
  results+=("$out/$name")
done

/usr/bin/python3 - "$window" "$steps" "${results[@]}" <<'EOF'
import json, statistics, sys

window, steps = int(sys.argv[1]), int(sys.argv[2])
print(f"| config | steps | max rel. diff of {window}-step moving averages | max rel. diff per step | "
      f"final {window}-step mean f32 / bf16 | median input tokens/s f32 / bf16 | within 1 % |")
print("| --- | ---: | ---: | ---: | --- | --- | --- |")
failed = False
for run in sys.argv[3:]:
    curves, rates = {}, {}
    for precision in ("f32", "bf16"):
        with open(f"{run}/{precision}/metrics.jsonl") as f:
            records = [r for r in map(json.loads, f) if "loss" in r]
        curves[precision] = [r["loss"] for r in records]
        rates[precision] = statistics.median(r["input_tokens_per_second"] for r in records)
    a, b = curves["f32"], curves["bf16"]
    if len(a) != steps or len(b) != steps:
        sys.exit(f"{run}: expected {steps} logged steps, got {len(a)} (f32) and {len(b)} (bf16)")
    # Trailing moving averages over full windows only: steps window..N.
    mean = lambda xs, i: sum(xs[i - window:i]) / window
    smoothed = max(abs(mean(b, i) / mean(a, i) - 1) for i in range(window, steps + 1))
    per_step = max(abs(y / x - 1) for x, y in zip(a, b))
    ok = smoothed < 0.01
    failed |= not ok
    print(f"| {run.rstrip('/').split('/')[-1]} | {steps} | {100 * smoothed:.3f} % | {100 * per_step:.3f} % | "
          f"{mean(a, steps):.4f} / {mean(b, steps):.4f} | {rates['f32']:.0f} / {rates['bf16']:.0f} | "
          f"{'yes' if ok else 'NO'} |")
sys.exit(1 if failed else 0)
EOF
