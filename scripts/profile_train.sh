#!/usr/bin/env bash
# Where a training step's time goes: `perf record -g` of `hnas-bench train` for one task and kind, then
# the samples' self time grouped into families (oneDNN matmul, each non-matmul op family, allocation,
# copies and fills, OpenMP waiting, the kernel's page faults, ...), in % of all samples.
#   scripts/profile_train.sh [--task headline|mlm] [--kind lnas|dnas|hnas] [--steps N] [--warmup N]
#                            [--threads N] [--precision f32|bf16] [--out DIR]
# Needs linux-perf (apt-get install linux-perf) and a built build/hnas-bench (HNAS_BUILD_DIR).
# oneDNN's JIT kernels are named for perf through DNNL_JIT_PROFILE=1 (a /tmp/perf-PID.map).
set -euo pipefail
cd "$(dirname "$0")/.."

task=headline kind=lnas steps=15 warmup=2 threads=2 precision=f32 out=""
while (($#)); do
  case "$1" in
    --task) task=${2:?}; shift ;;
    --kind) kind=${2:?}; shift ;;
    --steps) steps=${2:?}; shift ;;
    --warmup) warmup=${2:?}; shift ;;
    --threads) threads=${2:?}; shift ;;
    --precision) precision=${2:?}; shift ;;
    --out) out=${2:?}; shift ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "profile_train: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
command -v perf >/dev/null || { echo "profile_train: perf is missing: apt-get install linux-perf" >&2; exit 1; }
bench="${HNAS_BUILD_DIR:-build}/hnas-bench"
[ -x "$bench" ] || { echo "profile_train: $bench is missing; build the hnas-bench target first" >&2; exit 1; }
out=${out:-$(mktemp -d /tmp/profile_train.XXXXXX)}
mkdir -p "$out"
run="$task-$kind-$precision"
data="$out/perf-$run.data"

OMP_NUM_THREADS=$threads DNNL_JIT_PROFILE=1 perf record -q -g -F 499 -o "$data" -- \
  "$bench" train --task "$task" --kind "$kind" --threads "$threads" --steps "$steps" --warmup "$warmup" \
  --precision "$precision" >"$out/run-$run.json"
perf report -i "$data" --no-children --sort dso,sym --stdio -g none --percent-limit 0 2>/dev/null >"$out/report-$run.txt"
echo "profile_train: $(cat "$out/run-$run.json")"
python3 - "$out/report-$run.txt" <<'EOF'
import re, sys
# First matching family wins; patterns are matched against perf's symbol (demangled).
FAMILIES = [
    ("matmul (oneDNN: JIT kernels and library)", r"^libdnnl|^\[JIT\]|dnnl::|jit:|brgemm"),
    ("bf16 operand conversion (f32 -> bf16)", r"convert_to_bf16|round_to_bf16"),
    ("OpenMP runtime (libgomp: spin-waiting at barriers, team start)", r"^libgomp|GOMP_|gomp_"),
    ("attention normalization (softmax/DNAS/HNAS)", r"normalize_attention|hybrid_attention|normalize_rows|ops::.*attention|softmax"),
    ("layer norm", r"layer_norm"),
    ("model initialization (not the step)", r"Rng::normal_tensor|Rng::uniform_tensor|init_xavier|init_normal|__cos|__sin"),
    ("GELU (incl. libm erff)", r"gelu|erf"),
    ("dropout", r"dropout|masked_gradient"),
    ("cross-entropy / log-softmax", r"cross_entropy|log_softmax|logsumexp"),
    ("exp (libm, softmax / cross-entropy)", r"__expf|__exp|expf@plt"),
    ("embedding gather/scatter", r"embedding"),
    ("permute / transpose / slice copies", r"permute|copy_axis|slice|transpose|concat"),
    ("broadcast elementwise (add, mul, scale)", r"broadcast_binary|map_unary|elementwise|ops::add|ops::mul|scale"),
    ("reductions (bias grads, sums)", r"accumulate_reduced|reduce|ops::sum"),
    ("optimizer (Adam, LAMB)", r"Optimizer::step|adam_update|lamb_moments"),
    ("gradient clipping (norms)", r"clip_factors|squared_norm"),
    ("autograd bookkeeping", r"Var::|Node|GradSink|make_result|backward|shared_ptr|std::function"),
    ("memcpy / memset", r"memcpy|memset|memmove"),
    ("allocation (malloc/free, pool)", r"malloc|free|_int_|cfree|operator new|operator delete|Storage|aligned_alloc|tcache|mmap|munmap|brk"),
    ("kernel: page faults, zeroing pages", r"clear_page|page_fault|do_anonymous|handle_mm_fault|asm_exc_page|__handle|alloc_pages|rmqueue|zap_|unmap|lru|memcg"),
    ("kernel: futex / scheduling", r"futex|sched_yield|schedule|finish_task_switch"),
    ("kernel: other", r"^\[k\]|entry_SYSCALL|syscall|schedule|irq|do_syscall"),
]
rows = []
for line in open(sys.argv[1]):
    m = re.match(r"\s*([\d.]+)%\s+(\S.*?)\s+(\[.\])\s+(.*\S)\s*$", line)
    if m:
        rows.append((float(m.group(1)), m.group(2).strip(), m.group(3), m.group(4)))
totals, examples = {}, {}
for percent, dso, space, symbol in rows:
    name = f"{dso} {space} {symbol}"
    family = "other"
    for label, pattern in FAMILIES:
        if re.search(pattern, name):
            family = label
            break
    if family == "other" and space == "[k]":
        family = "kernel: other"
    totals[family] = totals.get(family, 0.0) + percent
    examples.setdefault(family, []).append((percent, symbol))
print(f"{'family':48s} {'% of samples':>12s}  top symbols")
for family, percent in sorted(totals.items(), key=lambda kv: -kv[1]):
    top = "; ".join(f"{s[:70]} {p:.1f}" for p, s in sorted(examples[family], reverse=True)[:3])
    print(f"{family:48s} {percent:12.1f}  {top}")
EOF
