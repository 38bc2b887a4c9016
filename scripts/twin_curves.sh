#!/usr/bin/env bash
# A PyTorch twin of any headline or mlm config (issue 48's check that a recipe's curve is the recipe's,
# not a defect of hnas): hnas trains the config for N steps; the twin (scripts/torch_real.py) starts from
# hnas's initial parameters and trains on the batches hnas drew, with the config's optimizer, schedule,
# clipping and dropout; then the mean training loss of every 50 steps, side by side.
#   scripts/twin_curves.sh CONFIG [--steps N] [--out DIR] [--threads N] [--set key=value …]
#   --steps N     training steps (default 1000)
#   --out DIR     where the run, the batches and the twin's JSON go (default runs/twin_<config name>)
#   --threads N   threads of each side, which run one after the other (default 2)
#   --set k=v     config overrides for hnas (repeatable); the twin reads the resolved config from the batches
# The twin runs in f32 on $PYTHON (default Debian's /usr/bin/python3 with python3-torch); hnas in the
# config's precision. Its step-0 loss (f32, dropout off) must agree with hnas's within 1e-4 relative.
# Dropout draws differ between the two, so the curves agree to within noise, not to the digit.
# Writes OUT/curves.md (the table) and prints it; a rerun retrains both sides.
set -euo pipefail
cd "$(dirname "$0")/.."

usage="usage: scripts/twin_curves.sh CONFIG [--steps N] [--out DIR] [--threads N] [--set key=value …]"
[ $# -ge 1 ] || { echo "$usage" >&2; exit 2; }
config=$1; shift
[ -f "$config" ] || { echo "twin_curves: no config file $config" >&2; exit 2; }
steps=1000 out="" threads=2 settings=()
while (($#)); do
  case "$1" in
    --steps) steps=${2:?--steps needs a value}; shift 2 ;;
    --out) out=${2:?--out needs a value}; shift 2 ;;
    --threads) threads=${2:?--threads needs a value}; shift 2 ;;
    --set) settings+=("${2:?--set needs key=value}"); shift 2 ;;
    *) echo "twin_curves: unknown argument $1 ($usage)" >&2; exit 2 ;;
  esac
done
for value in "$steps" "$threads"; do
  [[ "$value" =~ ^[1-9][0-9]*$ ]] || { echo "twin_curves: '$value' is not a positive integer" >&2; exit 2; }
done
python=${PYTHON:-/usr/bin/python3}
source scripts/bench_common.sh
require_torch twin_curves  # before hnas trains, not after
build_dir=${HNAS_BUILD_DIR:-build}
for binary in hnas hnas-bench; do
  [ -x "$build_dir/$binary" ] || { echo "twin_curves: $build_dir/$binary is missing; run scripts/setup.sh" >&2; exit 1; }
done
out=${out:-runs/twin_$(basename "$config" .json)}
mkdir -p "$out"
export OMP_NUM_THREADS=$threads

rm -rf "${out:?}/hnas"
echo "twin_curves: hnas trains $config for $steps steps (log $out/hnas.log)" >&2
"$build_dir/hnas" train --config "$config" --out "$out/hnas" \
  --set train.steps="$steps" train.log_every=50 ${settings[@]+"${settings[@]}"} >"$out/hnas.log" 2>&1 ||
  { echo "twin_curves: hnas failed; see $out/hnas.log" >&2; exit 1; }
"$build_dir/hnas-bench" batches --run "$out/hnas" --steps "$steps" --out "$out/run.batches" >/dev/null
echo "twin_curves: the twin trains on the same batches (log $out/twin.log)" >&2
"$python" scripts/torch_real.py --batches "$out/run.batches" --steps "$steps" --threads "$threads" \
  >"$out/twin.json" 2>"$out/twin.log" || { echo "twin_curves: the twin failed; see $out/twin.log" >&2; exit 1; }

"$python" - "$out" "$config" "$steps" <<'EOF' | tee "$out/curves.md"
import json, sys
out, config, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
twin = json.load(open(f"{out}/twin.json"))
hnas = {}
for line in open(f"{out}/hnas/metrics.jsonl"):
    record = json.loads(line)
    if "elapsed_seconds" in record:
        hnas[record["step"]] = record  # a resumed run re-logs steps: the last record of a step wins
relative0 = abs(twin["loss0_eval"] - twin["hnas_loss0_eval"]) / abs(twin["hnas_loss0_eval"])
if relative0 > 1e-4:
    sys.exit(f"twin_curves: step-0 loss {twin['loss0_eval']:.7f} against hnas's {twin['hnas_loss0_eval']:.7f}: not the same model")
print(f"`{config}`, {steps} steps; step-0 loss (f32, dropout off): hnas {twin['hnas_loss0_eval']:.7f}, "
      f"PyTorch {twin['torch']} {twin['loss0_eval']:.7f} (relative {relative0:.1e}).\n")
print("| steps | hnas mean loss | PyTorch twin mean loss | hnas − twin | relative |")
print("| ---: | ---: | ---: | ---: | ---: |")
worst, previous = 0.0, 0
for window in twin["losses"]:
    step = window["step"]
    if step not in hnas:
        continue
    ours, theirs = hnas[step]["loss"], window["loss"]
    relative = abs(ours - theirs) / abs(theirs)
    worst = max(worst, relative)
    print(f"| {previous + 1}–{step} | {ours:.4f} | {theirs:.4f} | {ours - theirs:+.4f} | {relative:.1e} |")
    previous = step
print(f"\nLargest relative difference of a 50-step mean: {worst:.1e}. hnas {hnas[steps]['elapsed_seconds']:.0f} s, "
      f"the twin {twin['seconds']:.0f} s on {twin['threads']} threads.")
EOF
