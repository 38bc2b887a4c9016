#!/usr/bin/env bash
# hnas against PyTorch on the reference training workloads (docs/performance.md), side by side in one run:
#   1. builds hnas-bench (Release) if needed;
#   2. checks, per task and attention kind, that both frameworks build the same model: hnas dumps its
#      initial parameters and first batch (hnas-bench train --dump-initial), PyTorch loads them
#      (scripts/torch_reference.py --load) and the step-0 losses (dropout off) must agree within
#      1e-4 relative, the step-0 gradient norms within 1e-3; the next steps' losses are shown;
#   3. times both, alternating hnas and PyTorch run by run, for every task and kind over several
#      rounds, and prints a markdown table of medians (ranges over the rounds in brackets), with
#      hnas's step over its matmul-only bound: one step's products timed alone in oneDNN,
#      on operands in cache and on operands evicted from the caches by a 64 MiB write.
# Options:
#   --quick           smoke test: 1 round of 2 timed steps after 1 warm-up step
#   --rounds N        rounds per configuration (default 3)
#   --steps N         timed training steps per run (default 20)
#   --warmup N        untimed steps before them (default 3)
#   --threads N       threads for both frameworks (default 2)
#   --tasks "A B"     subset of "headline mlm"
#   --kinds "A B"     subset of "lnas dnas hnas"
#   --out DIR         where the JSON lines and checkpoints go (default a fresh temporary directory)
#   --no-build        use the existing hnas-bench as it is (no cmake call)
#   --precision P     hnas's matmul precision in the timed runs: f32 (default) or bf16 (train.precision);
#                     PyTorch always trains in f32, and the step-0 check always runs both in f32
# Environment: HNAS_BUILD_DIR (default build), PYTHON (default /usr/bin/python3, Debian's, with torch).
# PyTorch must run on OpenBLAS (Debian's libopenblas0-openmp): without it, it falls back to the
# reference BLAS and is about 26x slower. The script stops if torch has not mapped OpenBLAS.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=3 steps=20 warmup=3 threads=2 tasks="headline mlm" kinds="lnas dnas hnas" out="" build=1 precision=f32
while (($#)); do
  case "$1" in
    --quick) rounds=1 steps=2 warmup=1 ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift ;;
    --steps) steps=${2:?--steps needs a value}; shift ;;
    --warmup) warmup=${2:?--warmup needs a value}; shift ;;
    --threads) threads=${2:?--threads needs a value}; shift ;;
    --tasks) tasks=${2:?--tasks needs a value}; shift ;;
    --kinds) kinds=${2:?--kinds needs a value}; shift ;;
    --out) out=${2:?--out needs a value}; shift ;;
    --no-build) build=0 ;;
    --precision) precision=${2:?--precision needs a value}; shift ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_train: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
for value in "$rounds" "$steps" "$warmup" "$threads"; do
  [[ "$value" =~ ^[0-9]+$ ]] || { echo "bench_train: '$value' is not a non-negative integer" >&2; exit 2; }
done
((rounds >= 1 && steps >= 1 && threads >= 1)) || { echo "bench_train: --rounds, --steps and --threads must be >= 1" >&2; exit 2; }
for task in $tasks; do [[ "$task" == headline || "$task" == mlm ]] || { echo "bench_train: unknown task $task" >&2; exit 2; }; done
for kind in $kinds; do [[ "$kind" =~ ^(lnas|dnas|hnas)$ ]] || { echo "bench_train: unknown kind $kind" >&2; exit 2; }; done
[[ "$precision" == f32 || "$precision" == bf16 ]] || { echo "bench_train: --precision must be f32 or bf16, got $precision" >&2; exit 2; }

python=${PYTHON:-/usr/bin/python3}
source scripts/bench_common.sh
require_torch bench_train

build_dir=${HNAS_BUILD_DIR:-build}
bench="$build_dir/hnas-bench"
if ((build)); then build_targets "$build_dir" hnas-bench; fi
[ -x "$bench" ] || { echo "bench_train: $bench is missing (build the hnas-bench target or drop --no-build)" >&2; exit 1; }

out=${out:-$(mktemp -d /tmp/bench_train.XXXXXX)}
mkdir -p "$out"
results="$out/results.jsonl" checks="$out/checks.jsonl"
: >"$results"
: >"$checks"
export OMP_NUM_THREADS=$threads

echo "bench_train: $(OMP_NUM_THREADS="" nproc --all) cores, $threads threads each, $rounds round(s) of $steps timed steps after $warmup warm-up; output in $out" >&2

# 2. the same model on both sides
for task in $tasks; do
  for kind in $kinds; do
    ckpt="$out/initial-$task-$kind.ckpt"
    "$bench" train --task "$task" --kind "$kind" --threads "$threads" --no-dropout --steps 3 --warmup 0 \
      --dump-initial "$ckpt" >>"$checks"
    "$python" scripts/torch_reference.py --load "$ckpt" --threads "$threads" --no-dropout --steps 3 --warmup 0 >>"$checks"
    rm -f "$ckpt"
  done
done
"$python" - "$checks" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
failed = False
print("step-0 check (dropout off, same initial weights and batch):", file=sys.stderr)
for h, t in zip(lines[0::2], lines[1::2]):
    rel = lambda a, b: abs(a - b) / max(abs(a), abs(b), 1e-30)
    loss_rel, norm_rel = rel(h["loss0_eval"], t["loss0_eval"]), rel(h["grad_norms"][0], t["grad_norms"][0])
    later = " ".join(f"step {i}: {a:.6f}/{b:.6f}" for i, (a, b) in enumerate(zip(h["losses"], t["losses"])) if i)
    ok = loss_rel <= 1e-4 and norm_rel <= 1e-3 and h["parameters"] == t["parameters"]
    failed |= not ok
    print(f"  {h['task']:8s} {h['kind']}: loss0 hnas {h['loss0_eval']:.7f} torch {t['loss0_eval']:.7f} (rel {loss_rel:.1e}); "
          f"|g|0 {h['grad_norms'][0]:.6f}/{t['grad_norms'][0]:.6f} (rel {norm_rel:.1e}); parameters "
          f"{h['parameters']}/{t['parameters']}; {later} {'ok' if ok else 'MISMATCH'}", file=sys.stderr)
sys.exit(1 if failed else 0)
EOF

# 3. timing, alternating the frameworks (and which goes first) run by run
for ((round = 1; round <= rounds; round++)); do
  for task in $tasks; do
    for kind in $kinds; do
      hnas_run=("$bench" train --task "$task" --kind "$kind" --threads "$threads" --steps "$steps" --warmup "$warmup"
                --precision "$precision" --matmul-bound)
      torch_run=("$python" scripts/torch_reference.py --task "$task" --kind "$kind" --threads "$threads" --steps "$steps" --warmup "$warmup")
      if ((round % 2)); then
        "${hnas_run[@]}" >>"$results"; "${torch_run[@]}" >>"$results"
      else
        "${torch_run[@]}" >>"$results"; "${hnas_run[@]}" >>"$results"
      fi
      echo "bench_train: round $round $task $kind done" >&2
    done
  done
done

"$python" - "$results" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
for r in runs:
    if r["impl"] == "torch" and not any("openblas" in lib for lib in r.get("blas", [])):
        sys.exit(f"bench_train: torch did not run on OpenBLAS ({r.get('blas')}); the comparison would be unfair")
def pick(impl, task, kind, key):
    return [r[key] for r in runs if r["impl"] == impl and r["task"] == task and r["kind"] == kind]
def med(values):
    return statistics.median(values)
def span(values, fmt):
    return f"{fmt.format(med(values))} [{fmt.format(min(values))}–{fmt.format(max(values))}]" if len(values) > 1 else fmt.format(values[0])
configs = list(dict.fromkeys((r["task"], r["kind"]) for r in runs))
hnas_precision = next(r.get("precision", "f32") for r in runs if r["impl"] == "hnas")
if hnas_precision != "f32":
    print(f"hnas trains with {hnas_precision} matmuls, PyTorch in f32.\n")
print("| task | kind | hnas input tokens/s | torch input tokens/s | hnas/torch | hnas step ms | torch step ms | hnas matmul-only ms | hnas step / matmul-only | matmul-only ms, evicted | step / evicted | hnas peak RSS MiB | torch peak RSS MiB | RSS hnas/torch | hnas step / lnas |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for task, kind in configs:
    ht, tt = pick("hnas", task, kind, "input_tokens_per_s"), pick("torch", task, kind, "input_tokens_per_s")
    hm, tm = pick("hnas", task, kind, "step_ms_median"), pick("torch", task, kind, "step_ms_median")
    hr, tr = pick("hnas", task, kind, "peak_rss_mib"), pick("torch", task, kind, "peak_rss_mib")
    lnas = pick("hnas", task, "lnas", "step_ms_median")
    bound, over_bound = pick("hnas", task, kind, "matmul_bound_ms"), pick("hnas", task, kind, "step_over_matmul_bound")
    evicted, over_evicted = pick("hnas", task, kind, "matmul_bound_evicted_ms"), pick("hnas", task, kind, "step_over_matmul_bound_evicted")
    relative = f"{med(hm) / med(lnas):.3f}" if lnas else "–"
    print(f"| {task} | {kind} | {span(ht, '{:.0f}')} | {span(tt, '{:.0f}')} | {med(ht) / med(tt):.2f} | {span(hm, '{:.0f}')} | "
          f"{span(tm, '{:.0f}')} | {span(bound, '{:.0f}')} | {span(over_bound, '{:.2f}')} | {span(evicted, '{:.0f}')} | "
          f"{span(over_evicted, '{:.2f}')} | {med(hr):.0f} | {med(tr):.0f} | "
          f"{med(hr) / med(tr):.2f} | {relative} |")
first = runs[0]
steps, warmup, threads = first["steps"], first["warmup"], first["threads"]
rounds = len(pick("hnas", *configs[0], "input_tokens_per_s"))
print(f"\nMedians over {rounds} round(s) [min–max]; each run {warmup} warm-up + {steps} timed steps, "
      f"{threads} threads; input tokens/s = tokens the model reads per step (source + target, or the MLM sequence) / median step time; "
      "matmul-only = one step's matrix products, each timed alone in oneDNN with the step's shapes and layouts "
      "(hnas-bench train --matmul-bound), summed; evicted: the same with a "
      f"{next(r['matmul_bound_evict_mib'] for r in runs if r['impl'] == 'hnas')} MiB buffer written before each product, so the operands come from "
      "memory as a step's do; model GFLOP/s (3 × forward matmul FLOPs / median step):")
for task, kind in configs:
    hg, tg = pick("hnas", task, kind, "model_gflop_per_s"), pick("torch", task, kind, "model_gflop_per_s")
    print(f"  {task} {kind}: hnas {med(hg):.1f}, torch {med(tg):.1f} "
          f"({pick('hnas', task, kind, 'model_gflop_per_step')[0]:.1f} GFLOP per step)")
EOF
