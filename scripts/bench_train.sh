#!/usr/bin/env bash
# hnas against its PyTorch peers on the reference training workloads (docs/performance.md), side by side
# in one run. The peers (scripts/torch_reference.py, the same model and step):
#   torch113  Debian's PyTorch 1.13, eager, always in f32 (the column kept for continuity);
#   eager     PyTorch 2 eager,                                    } from scripts/setup_peers.sh's environments,
#   compile   torch.compile (default mode) of the forward + loss, } in --precision (bf16: torch.autocast
#   ipex      intel_extension_for_pytorch.optimize(model, opt)    }   around forward and loss).
#   1. builds hnas-bench (Release) if needed;
#   2. checks, per task and attention kind, that every peer builds the same model: hnas dumps its
#      initial parameters and first batch (hnas-bench train --dump-initial), each peer loads them
#      (scripts/torch_reference.py --load, its own forward, in f32) and the step-0 losses (dropout off)
#      must agree within 1e-4 relative, the step-0 gradient norms within 1e-3; the next steps' losses are shown;
#   3. times them, alternating hnas and the peers run by run (the order reversed every other round), for
#      every task and kind over several rounds, and prints a markdown table of medians (ranges over the
#      rounds in brackets), with hnas's step over its matmul-only bound: one step's products timed alone
#      in oneDNN, on operands in cache and on operands evicted from the caches by a 64 MiB write, and a
#      table of torch.compile's first step (compilation), which the timing excludes as a warm-up step.
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
#   --precision P     precision of the timed runs: f32 (default) or bf16: hnas's train.precision, the PyTorch 2
#                     peers' autocast; PyTorch 1.13 always trains in f32, and the step-0 check runs in f32
#   --peers "A B"     subset of "torch113 eager compile ipex" (default all); a PyTorch 2 peer whose venv or
#                     package is missing is skipped, saying why
# Environment: HNAS_BUILD_DIR (default build), PYTHON (default /usr/bin/python3, Debian's, with torch),
# PEERS_TORCH_PYTHON and PEERS_IPEX_PYTHON (scripts/bench_common.sh's select_peers).
# PyTorch 1.13 must run on OpenBLAS (Debian's libopenblas0-openmp): without it, it falls back to the
# reference BLAS and is about 26x slower. The script stops if torch 1.13 has not mapped OpenBLAS.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=3 steps=20 warmup=3 threads=2 tasks="headline mlm" kinds="lnas dnas hnas" out="" build=1 precision=f32
peers="torch113 eager compile ipex"
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
    --peers) peers=${2:?--peers needs a value}; shift ;;
    -h|--help) sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
select_peers bench_train  # sets peers, torch_python, ipex_python and skipped ("peer: why", printed under the table)

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

echo "bench_train: $(OMP_NUM_THREADS="" nproc --all) cores, $threads threads each, $rounds round(s) of $steps timed steps after $warmup warm-up; peers: ${peers:-none}; output in $out" >&2

# 2. the same model on both sides
for task in $tasks; do
  for kind in $kinds; do
    ckpt="$out/initial-$task-$kind.ckpt"
    "$bench" train --task "$task" --kind "$kind" --threads "$threads" --no-dropout --steps 3 --warmup 0 \
      --dump-initial "$ckpt" >>"$checks"
    for peer in $peers; do
      peer_command "$peer" f32 scripts/torch_reference.py
      "${cmd[@]}" --load "$ckpt" --threads "$threads" --no-dropout --steps 3 --warmup 0 2>>"$out/peers.stderr" >>"$checks"
    done
    rm -f "$ckpt"
  done
done
"$python" - "$checks" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
failed = False
print("step-0 check (dropout off, same initial weights and batch):", file=sys.stderr)
pairs, h = [], None
for line in lines:
    if line["impl"] == "hnas":
        h = line
    else:
        pairs.append((h, line))
for h, t in pairs:
    rel = lambda a, b: abs(a - b) / max(abs(a), abs(b), 1e-30)
    peer = ("torch" + t["torch"].split("+")[0] + " " + t.get("peer", "eager")).ljust(19)
    loss_rel, norm_rel = rel(h["loss0_eval"], t["loss0_eval"]), rel(h["grad_norms"][0], t["grad_norms"][0])
    later = " ".join(f"step {i}: {a:.6f}/{b:.6f}" for i, (a, b) in enumerate(zip(h["losses"], t["losses"])) if i)
    ok = loss_rel <= 1e-4 and norm_rel <= 1e-3 and h["parameters"] == t["parameters"]
    failed |= not ok
    print(f"  {h['task']:8s} {h['kind']} {peer}: loss0 hnas {h['loss0_eval']:.7f} torch {t['loss0_eval']:.7f} (rel {loss_rel:.1e}); "
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
      order=(hnas $peers)
      if ((round % 2 == 0)); then order=($(printf '%s\n' "${order[@]}" | tac)); fi
      for who in "${order[@]}"; do
        if [[ "$who" == hnas ]]; then
          "${hnas_run[@]}" >>"$results"
        else
          peer_command "$who" "$precision" scripts/torch_reference.py
          "${cmd[@]}" --task "$task" --kind "$kind" --threads "$threads" --steps "$steps" --warmup "$warmup" \
            2>>"$out/peers.stderr" >>"$results"
        fi
      done
      echo "bench_train: round $round $task $kind done" >&2
    done
  done
done

printf '%s\n' ${skipped[@]+"${skipped[@]}"} >"$out/skipped.txt"
"$python" - "$results" "$out/skipped.txt" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
skipped = [l.strip() for l in open(sys.argv[2]) if l.strip()]
def column(r):
    if r["impl"] == "hnas":
        return "hnas"
    return "torch113" if r["torch"].startswith("1.") else r.get("peer", "eager")
for r in runs:
    r["column"] = column(r)
    if r["column"] == "torch113" and not any("openblas" in lib for lib in r.get("blas", [])):
        sys.exit(f"bench_train: torch did not run on OpenBLAS ({r.get('blas')}); the comparison would be unfair")
order = ["torch113", "eager", "compile", "ipex"]
present = [c for c in order if any(r["column"] == c for r in runs)]
version = lambda c: next(r["torch"].split("+")[0] for r in runs if r["column"] == c)
title = {"torch113": lambda: f"PyTorch {version('torch113')} f32", "eager": lambda: f"PyTorch {version('eager')} eager",
         "compile": lambda: "torch.compile", "ipex": lambda: "IPEX " + next(r["ipex"] for r in runs if r["column"] == "ipex")}
short = {"torch113": "1.13", "eager": "eager", "compile": "compile", "ipex": "IPEX"}
def pick(col, task, kind, key):
    return [r[key] for r in runs if r["column"] == col and r["task"] == task and r["kind"] == kind and key in r]
def med(values):
    return statistics.median(values)
def span(values, fmt):
    return f"{fmt.format(med(values))} [{fmt.format(min(values))}–{fmt.format(max(values))}]" if len(values) > 1 else fmt.format(values[0])
configs = list(dict.fromkeys((r["task"], r["kind"]) for r in runs))
precision = next(r.get("precision", "f32") for r in runs if r["impl"] == "hnas")
head = ["task", "kind", "precision", "hnas ms"] + [f"{title[c]()} ms" for c in present] \
     + [f"hnas / {short[c]} speed" for c in present] + ["step / bound in cache", "step / bound evicted"] \
     + [f"peak RSS hnas / {short[c]}" for c in present]
print("| " + " | ".join(head) + " |")
print("| --- | --- | --- | " + " | ".join("---:" for _ in head[3:]) + " |")
for task, kind in configs:
    hm = pick("hnas", task, kind, "step_ms_median")
    cells = [task, kind, precision, span(hm, "{:.1f}")]
    cells += [span(pick(c, task, kind, "step_ms_median"), "{:.1f}") for c in present]
    cells += [f"{med(pick(c, task, kind, 'step_ms_median')) / med(hm):.2f}" for c in present]
    cells += [span(pick("hnas", task, kind, "step_over_matmul_bound"), "{:.2f}"),
              span(pick("hnas", task, kind, "step_over_matmul_bound_evicted"), "{:.2f}")]
    cells += [f"{med(pick('hnas', task, kind, 'peak_rss_mib')) / med(pick(c, task, kind, 'peak_rss_mib')):.2f}" for c in present]
    print("| " + " | ".join(cells) + " |")
first = runs[0]
steps, warmup, threads = first["steps"], first["warmup"], first["threads"]
rounds = len(pick("hnas", *configs[0], "step_ms_median"))
print(f"\nMedians over {rounds} round(s) [min–max]; each run {warmup} warm-up + {steps} timed steps, {threads} threads; "
      f"PyTorch 2 peers in {precision}" + (" (torch.autocast)" if precision == "bf16" else "") + ", PyTorch 1.13 in f32; "
      "speed = peer ms / hnas ms (medians); bound = one step's matrix products, each timed alone in oneDNN with the "
      "step's shapes and layouts (hnas-bench train --matmul-bound), summed; evicted: the same with a "
      f"{next(r['matmul_bound_evict_mib'] for r in runs if r['impl'] == 'hnas')} MiB buffer written before each product.")
for reason in skipped:
    print(f"Skipped {reason}.")
if "compile" in present:
    print("\n| task | kind | precision | torch.compile first step s (compiles) | compile s (first step − median step) |")
    print("| --- | --- | --- | ---: | ---: |")
    for task, kind in configs:
        print(f"| {task} | {kind} | {precision} | {span(pick('compile', task, kind, 'first_step_s'), '{:.1f}')} | "
              f"{span(pick('compile', task, kind, 'compile_s'), '{:.1f}')} |")
print("\nPeak RSS MiB (medians) and model GFLOP/s (3 × forward matmul FLOPs / median step):")
for task, kind in configs:
    rss = ", ".join(f"{short.get(c, c)} {med(pick(c, task, kind, 'peak_rss_mib')):.0f}" for c in ["hnas"] + present)
    gflops = ", ".join(f"{short.get(c, c)} {med(pick(c, task, kind, 'model_gflop_per_s')):.1f}" for c in ["hnas"] + present)
    print(f"  {task} {kind}: RSS {rss}; GFLOP/s {gflops} "
          f"({pick('hnas', task, kind, 'model_gflop_per_step')[0]:.1f} GFLOP per step)")
EOF
