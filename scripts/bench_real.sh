#!/usr/bin/env bash
# Real runs of hnas beside their PyTorch twins (docs/performance.md), side by side in one run: for each config,
#   1. `hnas train` on the bundled data for --steps steps (batches of varying length, as a user trains);
#   2. `hnas-bench batches` writes the batches that run drew, with a model's initial parameters;
#   3. scripts/torch_real.py trains the PyTorch twin on the same batches in the same order (its step-0
#      loss, dropout off, must equal hnas's within 1e-4 relative: the same model on both sides);
#   4. with --baseline BIN, the same `hnas train` run of another hnas binary (the code before a change);
#   5. with --bf16, the same `hnas train` run with bf16 matmuls (train.precision=bf16), and the twin
#      under PyTorch's mixed precision (torch_real.py --bf16: autocast to bf16).
# It prints a markdown table: max RSS (GNU time), hnas's tensor live peak, the seconds to the last step
# (hnas: metrics.jsonl's elapsed_seconds; torch: from its first step's start), and the ratios.
#   gigaword: configs/gigaword.json --set train.steps=N data.batch_sentences=64 train.learning_rate=0.001
#   mlm:      configs/mlm.json --set train.steps=N
# Options:
#   --steps N          training steps per run (default 400)
#   --threads N        threads for both frameworks (default 2)
#   --configs "A B"    subset of "gigaword mlm"
#   --baseline BIN     also run this hnas binary (e.g. a copy of build/hnas made before a change)
#   --bf16             also run hnas with bf16 matmuls and the twin under bf16 autocast
#   --out DIR          where runs, batches and JSON lines go (default a fresh temporary directory)
#   --no-build         use build/hnas and build/hnas-bench as they are
# Environment: HNAS_BUILD_DIR (default build), PYTHON (default /usr/bin/python3, Debian's, with torch).
set -euo pipefail
cd "$(dirname "$0")/.."

steps=400 threads=2 configs="gigaword mlm" baseline="" out="" build=1 bf16=0
while (($#)); do
  case "$1" in
    --steps) steps=${2:?--steps needs a value}; shift ;;
    --threads) threads=${2:?--threads needs a value}; shift ;;
    --configs) configs=${2:?--configs needs a value}; shift ;;
    --baseline) baseline=${2:?--baseline needs a value}; shift ;;
    --bf16) bf16=1 ;;
    --out) out=${2:?--out needs a value}; shift ;;
    --no-build) build=0 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "bench_real: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
for value in "$steps" "$threads"; do
  [[ "$value" =~ ^[1-9][0-9]*$ ]] || { echo "bench_real: '$value' is not a positive integer" >&2; exit 2; }
done
for config in $configs; do
  [[ "$config" == gigaword || "$config" == mlm ]] || { echo "bench_real: unknown config $config (gigaword, mlm)" >&2; exit 2; }
done
[ -z "$baseline" ] || [ -x "$baseline" ] || { echo "bench_real: --baseline $baseline is not an executable" >&2; exit 2; }

python=${PYTHON:-/usr/bin/python3}
source scripts/bench_common.sh
require_torch bench_real
if [ ! -x /usr/bin/time ]; then
  [ "$(id -u)" -eq 0 ] || { echo "bench_real: GNU time (/usr/bin/time, Debian's time) is missing; install it as root" >&2; exit 1; }
  echo "bench_real: installing GNU time" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null
fi

build_dir=${HNAS_BUILD_DIR:-build}
if ((build)); then build_targets "$build_dir" hnas hnas-bench; fi
out=${out:-$(mktemp -d /tmp/bench_real.XXXXXX)}
copy_binaries bench_real "$build_dir" "$out" hnas hnas-bench
[ -z "$baseline" ] || cp "$baseline" "$out/bin/hnas-baseline"
results="$out/results.jsonl"
: >"$results"
export OMP_NUM_THREADS=$threads
echo "bench_real: $(OMP_NUM_THREADS="" nproc --all) cores, $threads threads, $steps steps per run; output in $out" >&2

# hnas_run NAME BINARY CONFIG SETTINGS...: one `hnas train` run, appended to results as a JSON line.
hnas_run() {
  local name=$1 binary=$2 config=$3; shift 3
  rm -rf "${out:?}/$name"
  /usr/bin/time -v -o "$out/$name.time" "$binary" train --config "$config" --out "$out/$name" --set "$@" \
    >"$out/$name.log" 2>&1 || { echo "bench_real: $name failed; see $out/$name.log" >&2; exit 1; }
  "$python" - "$out" "$name" "$steps" >>"$results" <<'EOF'
import json, re, sys
out, name, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
records = [json.loads(line) for line in open(f"{out}/{name}/metrics.jsonl")]
progress = [r for r in records if "elapsed_seconds" in r]
memory = [r["memory"] for r in records if "memory" in r]
last = next(r for r in progress if r["step"] == steps)
time_text = open(f"{out}/{name}.time").read()
max_rss_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", time_text).group(1))
# An older hnas (a --baseline) may have recorded memory only at validations (mlm.json has none), and
# no profile.
profile = last.get("profile", {})
print(json.dumps({"name": name, "impl": "hnas", "seconds": last["elapsed_seconds"], "loss": last["loss"],
                  "max_rss_mib": max_rss_kib / 1024,
                  "live_peak_mib": max(m["tensor_live_peak"] for m in memory) / 2**20 if memory else None,
                  "minor_faults": profile.get("minor_faults"), "matmul_primitives": profile.get("matmul_primitives")}))
EOF
}

# torch_run NAME [--bf16]: the twin trained on $config's batches, appended to results as a JSON line.
torch_run() {
  local name=$1; shift
  /usr/bin/time -v -o "$out/$name.time" "$python" scripts/torch_real.py --batches "$out/$config.batches" \
    --threads "$threads" "$@" >"$out/$name.json" 2>"$out/$name.log" \
    || { echo "bench_real: the torch twin $name failed; see $out/$name.log" >&2; exit 1; }
  "$python" - "$out" "$name" >>"$results" <<'EOF'
import json, re, sys
out, name = sys.argv[1], sys.argv[2]
twin = json.load(open(f"{out}/{name}.json"))
relative = abs(twin["loss0_eval"] - twin["hnas_loss0_eval"]) / abs(twin["hnas_loss0_eval"])
if relative > 1e-4:
    sys.exit(f"bench_real: {name}: step-0 loss torch {twin['loss0_eval']} hnas {twin['hnas_loss0_eval']}: not the same model")
if not any("openblas" in library for library in twin["blas"]):
    sys.exit(f"bench_real: torch did not run on OpenBLAS ({twin['blas']}); the comparison would be unfair")
max_rss_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(f"{out}/{name}.time").read()).group(1))
print(json.dumps({"name": name, "impl": "torch", "seconds": twin["seconds"], "loss": twin["losses"][-1]["loss"],
                  "max_rss_mib": max_rss_kib / 1024, "loss0_relative": relative}))
EOF
}

for config in $configs; do
  case "$config" in
    gigaword) file=configs/gigaword.json settings=(train.steps="$steps" data.batch_sentences=64 train.learning_rate=0.001) ;;
    mlm) file=configs/mlm.json settings=(train.steps="$steps") ;;
  esac
  echo "bench_real: $config: hnas" >&2
  hnas_run "$config-hnas" "$out/bin/hnas" "$file" "${settings[@]}"
  "$out/bin/hnas-bench" batches --run "$out/$config-hnas" --steps "$steps" --out "$out/$config.batches" >/dev/null
  echo "bench_real: $config: torch" >&2
  torch_run "$config-torch"
  if [ -n "$baseline" ]; then
    echo "bench_real: $config: baseline hnas" >&2
    hnas_run "$config-baseline" "$out/bin/hnas-baseline" "$file" "${settings[@]}"
  fi
  if ((bf16)); then
    echo "bench_real: $config: hnas in bf16" >&2
    hnas_run "$config-hnas_bf16" "$out/bin/hnas" "$file" "${settings[@]}" train.precision=bf16
    echo "bench_real: $config: torch under bf16 autocast" >&2
    torch_run "$config-torch_bf16" --bf16
  fi
done

"$python" - "$results" "$steps" <<'EOF'
import json, sys
runs = {r["name"]: r for r in map(json.loads, open(sys.argv[1]))}
steps = sys.argv[2]
print(f"| run | max RSS MiB | tensor live peak MiB | RSS / live peak | RSS / torch | seconds to step {steps} | speed / torch | "
      f"loss (last 50 steps) | minor faults | matmul primitives |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for name, r in runs.items():
    torch = runs[name.split("-")[0] + "-torch"]  # PyTorch in f32: every row's reference
    live = r.get("live_peak_mib")
    cells = [name, f"{r['max_rss_mib']:.0f}", f"{live:.0f}" if live else "–",
             f"{r['max_rss_mib'] / live:.2f}" if live else "–", f"{r['max_rss_mib'] / torch['max_rss_mib']:.2f}",
             f"{r['seconds']:.1f}", f"{torch['seconds'] / r['seconds']:.2f}", f"{r['loss']:.4f}",
             str(r.get("minor_faults") or "–"), str(r.get("matmul_primitives") or "–")]
    print("| " + " | ".join(cells) + " |")
print(f"\nStep-0 loss (dropout off, same parameters and batch), torch against hnas, relative: " +
      ", ".join(f"{n.split('-')[0]} {r['loss0_relative']:.1e}" for n, r in runs.items() if n.endswith("-torch")))
for name in (n for n in runs if n.endswith("-hnas_bf16")):
    config = name.split("-")[0]
    hnas_seconds, torch_seconds = runs[name]["seconds"], runs[config + "-torch_bf16"]["seconds"]
    print(f"{config}, both in bf16: hnas {hnas_seconds:.1f} s, PyTorch under autocast {torch_seconds:.1f} s: "
          f"hnas {torch_seconds / hnas_seconds:.2f}x as fast")
EOF
