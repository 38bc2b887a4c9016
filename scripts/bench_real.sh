#!/usr/bin/env bash
# Real runs of hnas beside their PyTorch peers (docs/performance.md), side by side in one run: for each config,
#   1. `hnas train` on the bundled data for --steps steps (batches of varying length, as a user trains) in
#      --precision (train.precision);
#   2. `hnas-bench batches` writes the batches that run drew, with a model's initial parameters;
#   3. each peer trains the PyTorch twin (scripts/torch_real.py) on the same batches in the same order; its
#      step-0 loss (f32, dropout off, through the peer's own forward) must equal hnas's within 1e-4 relative:
#      the same model on both sides. The peers:
#        torch113  Debian's PyTorch 1.13, eager, always in f32 (the column kept for continuity);
#        eager     PyTorch 2 eager,                                    } from scripts/setup_peers.sh's environments,
#        compile   torch.compile (default mode, dynamic=None) of the   } in --precision (bf16: torch.autocast
#                  forward + loss; the optimizer stays eager           }   around forward and loss);
#        ipex      intel_extension_for_pytorch.optimize(model, opt)    }
#      the batches' varying shapes make torch.compile recompile: the steps during which it compiled a graph
#      are reported apart (count, seconds, graphs), and its seconds to the last step are those of all the
#      steps at the rate of the steps that compiled nothing;
#   4. with --baseline BIN, the same `hnas train` run of another hnas binary (the code before a change).
# Every run is repeated --rounds times, the runs of a round alternating with the other rounds' order
# (hnas first in odd rounds, last in even ones), so that a drift of the machine's speed hits every system.
# It prints a markdown table, medians over the rounds [min–max]: max RSS (GNU time), hnas's tensor live
# peak, the seconds to the last step (hnas: metrics.jsonl's elapsed_seconds; torch: from its first step's
# start), hnas's speed and max RSS against each run (ratios within a round); then each peer's step-0
# check and torch.compile's compiling steps.
#   gigaword: configs/gigaword.json --set train.steps=N data.batch_sentences=64 train.learning_rate=0.001
#   mlm:      configs/mlm.json --set train.steps=N
# Options:
#   --steps N          training steps per run (default 400)
#   --rounds N         alternating rounds (default 2)
#   --threads N        threads for both frameworks (default 2)
#   --configs "A B"    subset of "gigaword mlm"
#   --baseline BIN     also run this hnas binary (e.g. a copy of build/hnas made before a change)
#   --precision P      f32 (default) or bf16: hnas's train.precision (the baseline's too), the PyTorch 2 peers'
#                      autocast; PyTorch 1.13 always trains in f32, and the step-0 check runs in f32
#   --peers "A B"      subset of "torch113 eager compile ipex" (default all); a PyTorch 2 peer whose venv or
#                      package is missing is skipped, saying why
#   --out DIR          where runs, batches and JSON lines go (default a fresh temporary directory)
#   --no-build         use build/hnas and build/hnas-bench as they are
# Environment: HNAS_BUILD_DIR (default build), PYTHON (default /usr/bin/python3, Debian's, with torch),
# PEERS_TORCH_PYTHON and PEERS_IPEX_PYTHON (scripts/bench_common.sh's select_peers).
set -euo pipefail
cd "$(dirname "$0")/.."

steps=400 rounds=2 threads=2 configs="gigaword mlm" baseline="" out="" build=1 precision=f32
peers="torch113 eager compile ipex"
while (($#)); do
  case "$1" in
    --steps) steps=${2:?--steps needs a value}; shift ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift ;;
    --threads) threads=${2:?--threads needs a value}; shift ;;
    --configs) configs=${2:?--configs needs a value}; shift ;;
    --baseline) baseline=${2:?--baseline needs a value}; shift ;;
    --precision) precision=${2:?--precision needs a value}; shift ;;
    --peers) peers=${2:?--peers needs a value}; shift ;;
    --out) out=${2:?--out needs a value}; shift ;;
    --no-build) build=0 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "bench_real: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
for value in "$steps" "$rounds" "$threads"; do
  [[ "$value" =~ ^[1-9][0-9]*$ ]] || { echo "bench_real: '$value' is not a positive integer" >&2; exit 2; }
done
for config in $configs; do
  [[ "$config" == gigaword || "$config" == mlm ]] || { echo "bench_real: unknown config $config (gigaword, mlm)" >&2; exit 2; }
done
[ -z "$baseline" ] || [ -x "$baseline" ] || { echo "bench_real: --baseline $baseline is not an executable" >&2; exit 2; }
[[ "$precision" == f32 || "$precision" == bf16 ]] || { echo "bench_real: --precision must be f32 or bf16, got $precision" >&2; exit 2; }

python=${PYTHON:-/usr/bin/python3}
source scripts/bench_common.sh
select_peers bench_real  # sets peers, torch_python, ipex_python and skipped ("peer: why", printed under the table)
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
echo "bench_real: $(OMP_NUM_THREADS="" nproc --all) cores, $threads threads, $rounds rounds of $steps steps per run in $precision;" \
  "peers: ${peers:-none}; output in $out" >&2

# hnas_run NAME BINARY CONFIG SETTINGS...: one `hnas train` run in $precision, appended to results as a JSON
# line. NAME is CONFIG-IMPL-ROUND.
hnas_run() {
  local name=$1 binary=$2 config=$3; shift 3
  if [[ "$precision" == bf16 ]]; then set -- "$@" train.precision=bf16; fi
  rm -rf "${out:?}/$name"
  /usr/bin/time -v -o "$out/$name.time" "$binary" train --config "$config" --out "$out/$name" --set "$@" \
    >"$out/$name.log" 2>&1 || { echo "bench_real: $name failed; see $out/$name.log" >&2; exit 1; }
  "$python" - "$out" "$name" "$steps" "$precision" >>"$results" <<'EOF'
import json, re, sys
out, name, steps, precision = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
records = [json.loads(line) for line in open(f"{out}/{name}/metrics.jsonl")]
progress = [r for r in records if "elapsed_seconds" in r]
memory = [r["memory"] for r in records if "memory" in r]
last = next(r for r in progress if r["step"] == steps)
time_text = open(f"{out}/{name}.time").read()
max_rss_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", time_text).group(1))
# An older hnas (a --baseline) may have recorded memory only at validations (mlm.json has none), and
# no profile.
profile = last.get("profile", {})
print(json.dumps({"name": name, "impl": name.split("-")[1], "round": int(name.split("-")[2]), "precision": precision, "seconds": last["elapsed_seconds"],
                  "loss": last["loss"], "max_rss_mib": max_rss_kib / 1024,
                  "live_peak_mib": max(m["tensor_live_peak"] for m in memory) / 2**20 if memory else None,
                  "minor_faults": profile.get("minor_faults"), "matmul_primitives": profile.get("matmul_primitives")}))
EOF
}

# torch_run PEER ROUND: the twin of PEER trained on $config's batches (its step-0 loss checked), appended to
# results as a JSON line.
torch_run() {
  local peer=$1 name=$config-$1-$2
  peer_command "$peer" "$precision" scripts/torch_real.py
  /usr/bin/time -v -o "$out/$name.time" "${cmd[@]}" --batches "$out/$config.batches" --threads "$threads" \
    >"$out/$name.json" 2>"$out/$name.log" || { echo "bench_real: the $peer twin failed; see $out/$name.log" >&2; exit 1; }
  "$python" - "$out" "$name" "$peer" >>"$results" <<'EOF'
import json, re, sys
out, name, peer = sys.argv[1], sys.argv[2], sys.argv[3]
twin = json.load(open(f"{out}/{name}.json"))
relative = abs(twin["loss0_eval"] - twin["hnas_loss0_eval"]) / abs(twin["hnas_loss0_eval"])
verdict = "ok" if relative <= 1e-4 else "MISMATCH: not the same model"
print(f"bench_real: {name}: step-0 loss (f32, dropout off) {twin['loss0_eval']:.7f}, hnas {twin['hnas_loss0_eval']:.7f} "
      f"(relative {relative:.1e}) {verdict}", file=sys.stderr)
if relative > 1e-4:
    sys.exit(1)
if peer == "torch113" and not any("openblas" in library for library in twin["blas"]):
    sys.exit(f"bench_real: torch did not run on OpenBLAS ({twin['blas']}); the comparison would be unfair")
max_rss_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(f"{out}/{name}.time").read()).group(1))
record = {"name": name, "impl": peer, "round": int(name.split("-")[2]), "precision": twin["precision"], "seconds": twin["seconds"],
          "loss": twin["losses"][-1]["loss"], "max_rss_mib": max_rss_kib / 1024, "loss0_relative": relative,
          "torch": twin["torch"].split("+")[0]}
for key in ("ipex", "loss0_eval_s", "seconds_without_compiling", "compiling_units", "compiling_seconds", "graphs_before",
            "graphs", "frames_left_eager", "cache_size_limit"):
    if key in twin:
        record[key] = twin[key]
print(json.dumps(record))
EOF
}

for config in $configs; do
  case "$config" in
    gigaword) file=configs/gigaword.json settings=(train.steps="$steps" data.batch_sentences=64 train.learning_rate=0.001) ;;
    mlm) file=configs/mlm.json settings=(train.steps="$steps") ;;
  esac
  rm -f "$out/$config.batches"
  systems=(hnas $peers)
  [ -z "$baseline" ] || systems+=(baseline)
  for round in $(seq "$rounds"); do
    order=("${systems[@]}")
    if ((round % 2 == 0)); then
      order=(); for ((i = ${#systems[@]} - 1; i >= 0; i--)); do order+=("${systems[i]}"); done
    fi
    for system in "${order[@]}"; do
      echo "bench_real: $config, round $round: $system" >&2
      case "$system" in
        hnas) hnas_run "$config-hnas-$round" "$out/bin/hnas" "$file" "${settings[@]}" ;;
        baseline) hnas_run "$config-baseline-$round" "$out/bin/hnas-baseline" "$file" "${settings[@]}" ;;
        *) torch_run "$system" "$round" ;;
      esac
      # The first round starts with hnas, whose run the peers' batches come from (the same seed, every round).
      if [[ "$system" == hnas && ! -e "$out/$config.batches" && -n "$peers" ]]; then
        "$out/bin/hnas-bench" batches --run "$out/$config-hnas-$round" --steps "$steps" --out "$out/$config.batches" >/dev/null
      fi
    done
  done
done

printf '%s\n' ${skipped[@]+"${skipped[@]}"} >"$out/skipped.txt"
"$python" - "$results" "$steps" "$out/skipped.txt" <<'EOF'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
steps, skipped = sys.argv[2], [line.strip() for line in open(sys.argv[3]) if line.strip()]
titles = {"hnas": "hnas", "baseline": "hnas baseline", "torch113": "PyTorch {torch}", "eager": "PyTorch {torch} eager",
          "compile": "torch.compile", "ipex": "IPEX {ipex}"}
def seconds(r):  # torch.compile without the steps that compiled a graph: all steps at the others' rate
    return r.get("seconds_without_compiling", r["seconds"])
def spread(values, fmt):
    text = fmt.format(statistics.median(values))
    return text + f" [{fmt.format(min(values))}–{fmt.format(max(values))}]" if len(values) > 1 else text
print(f"| config | run | precision | max RSS MiB | tensor live peak MiB | RSS / live peak | seconds to step {steps} | "
      f"hnas speed / run's | hnas max RSS / run's | loss (last 50 steps) | minor faults | matmul primitives |")
print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
systems = list(dict.fromkeys((r["name"].split("-")[0], r["impl"]) for r in runs))
for config, impl in systems:
    mine = sorted((r for r in runs if r["name"].startswith(config + "-") and r["impl"] == impl), key=lambda r: r["round"])
    hnas = {r["round"]: r for r in runs if r["name"].startswith(config + "-") and r["impl"] == "hnas"}
    live = [r["live_peak_mib"] for r in mine if r.get("live_peak_mib")]
    if any("compiling_units" in r and "seconds_without_compiling" not in r for r in mine):
        time, speed = spread([r["seconds"] for r in mine], "{:.1f}") + " (every step compiled)", "–"
    else:
        time = spread([seconds(r) for r in mine], "{:.1f}")
        if "compiling_units" in mine[0]:
            time += " (without its compiling steps)"
        speed = spread([seconds(r) / hnas[r["round"]]["seconds"] for r in mine], "{:.2f}")
    cells = [config, titles[impl].format(**mine[0]), mine[0]["precision"], spread([r["max_rss_mib"] for r in mine], "{:.0f}"),
             spread(live, "{:.0f}") if live else "–",
             spread([r["max_rss_mib"] / r["live_peak_mib"] for r in mine if r.get("live_peak_mib")], "{:.2f}") if live else "–",
             time, speed, spread([hnas[r["round"]]["max_rss_mib"] / r["max_rss_mib"] for r in mine], "{:.2f}"),
             f"{mine[-1]['loss']:.4f}", str(mine[-1].get("minor_faults") or "–"), str(mine[-1].get("matmul_primitives") or "–")]
    print("| " + " | ".join(cells) + " |")
checked = [r for r in runs if "loss0_relative" in r and r["round"] == 1]
if checked:
    print("\nStep-0 loss (f32, dropout off, same parameters and batch, each peer's own forward) against hnas's, relative: " +
          ", ".join(f"{r['name'].rsplit('-', 1)[0]} {r['loss0_relative']:.1e}" for r in checked) + " (each ≤ 1e-4).")
compiled = [r for r in runs if "compiling_units" in r]
if compiled:
    print(f"\ntorch.compile (default mode, dynamic=None; config.cache_size_limit {compiled[0]['cache_size_limit']}): the "
          "steps during which it compiled a graph, left out of its seconds above:\n")
    print(f"| config | round | precision | step-0 check s (its own f32 graph) | compiling steps (from 0) | their seconds | "
          f"graphs compiled (check / steps) | frames left eager | seconds to step {steps} with them |")
    print("| --- | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: |")
    for r in compiled:
        shown = ", ".join(map(str, r["compiling_units"][:12])) + (" …" if len(r["compiling_units"]) > 12 else "")
        print(f"| {r['name'].split('-')[0]} | {r['round']} | {r['precision']} | {r['loss0_eval_s']:.1f} | {len(r['compiling_units'])}: {shown} | "
              f"{r['compiling_seconds']:.1f} | {r['graphs_before']} / {r['graphs']} | {r['frames_left_eager']} | {r['seconds']:.1f} |")
for reason in skipped:
    print(f"Skipped {reason}.")
EOF
