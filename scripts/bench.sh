#!/usr/bin/env bash
# hnas's speed and numerics measured, one subcommand each (docs/performance.md, docs/distributed.md):
#
#   scripts/bench.sh train [--quick] [--rounds 3] [--steps 20] [--warmup 3] [--threads 2] [--tasks "headline mlm"]
#                          [--kinds "lnas dnas hnas"] [--precision f32|bf16] [--peers "…"] [--out DIR] [--no-build]
#     hnas-bench train against its PyTorch peers on the reference workloads: first every peer must build the same
#     model (scripts/torch_reference.py --load of hnas's initial parameters and batch; step-0 loss within 1e-4,
#     gradient norm within 1e-3, dropout off, f32), then timed runs alternating run by run (the order reversed
#     every other round): medians [min–max] of step times, speed and peak RSS ratios, hnas's step over its
#     matmul-only bound (operands in cache, and evicted by a 64 MiB write) and torch.compile's first step.
#     --quick: 1 round of 2 timed steps after 1 warm-up step.
#   scripts/bench.sh real [--steps 400] [--rounds 2] [--threads 2] [--configs "gigaword mlm"] [--baseline BIN]
#                         [--precision f32|bf16] [--peers "…"] [--out DIR] [--no-build]
#     `hnas train` on the bundled data (gigaword: configs/gigaword.json with batches of 64 at rate 0.001; mlm:
#     configs/mlm.json), then each peer trains scripts/torch_reference.py on the very batches that run drew
#     (hnas-bench batches), from the same parameters (step-0 loss checked); --baseline adds another hnas binary.
#     Rounds alternate; medians [min–max] of max RSS (GNU time), hnas's tensor live peak, seconds to the last
#     step and the ratios; torch.compile's recompiling steps (the batches' shapes vary) are reported apart.
#   scripts/bench.sh decode [--checkpoint FILE] [--steps 400] [--beams "1 4"] [--count 1951] [--batch 32]
#                           [--rounds 3] [--threads 2] [--precision f32|bf16] [--peers "…"] [--out DIR] [--no-build]
#     hnas-bench decode's beam search beside scripts/torch_reference.py (cached keys and values, the same search)
#     on the same model and batches: articles/s per beam, the ratios, how many best hypotheses are hnas's (in
#     bf16 agreement, not identity); without --checkpoint it first trains configs/gigaword.json for --steps.
#   scripts/bench.sh ddp [--configs "tiny gigaword"] [--link pair|loopback] [--steps 60] [--skip 20] [--rounds 2]
#                        [--rate 1gbit] [--delay 0.5ms] [--baseline BIN] [--bf16-sums] [--out DIR] [--no-build]
#     2 ranks of `hnas train` (mpirun over TCP, one thread and core each) in network namespaces of their own, over
#     their link as it is and slowed by tc (netem rate and delay; tbf's rate alone without sch_netem), alternating.
#     pair: two namespaces joined by a veth pair, one rank in each (full duplex); loopback: one namespace whose
#     loopback queue both directions share. Seconds per step from step --skip on, the gradient wait after
#     backward, and a model of the slow-down on 8 and 64 machines; --bf16-sums adds train.bf16_gradient_sums runs.
#     Needs root, Open MPI, iproute2 and taskset.
#   scripts/bench.sh profile [--task headline|mlm] [--kind lnas|dnas|hnas] [--steps 15] [--warmup 2] [--threads 2]
#                            [--precision f32|bf16] [--out DIR]
#     where a step's time goes: `perf record -g` of hnas-bench train, the samples' self time in families (oneDNN
#     matmul, each op family, allocation, OpenMP waiting, page faults, …). Needs linux-perf and hnas-bench.
#   scripts/bench.sh bf16 [--steps 500] [--window 50] [--out DIR] [--no-build] [CONFIG[:KIND] …]
#     the first N steps of each config (default the tiny ones) with f32 and with bf16 matmuls (train.precision),
#     one tokenizer, no validation: the largest relative difference of the W-step moving averages of the losses
#     (checked against 1 %), the largest per-step difference and the median throughput. KIND sets the encoder's.
#   scripts/bench.sh twin CONFIG [--steps 1000] [--out DIR] [--threads 2] [--set key=value …]
#     any headline or mlm config beside a PyTorch twin (scripts/torch_reference.py, f32) that starts from hnas's initial
#     parameters and trains on the batches hnas drew: step-0 loss checked, then the mean training loss of every
#     50 steps side by side (OUT/curves.md, default OUT runs/twin_<config>); whether a recipe's curve is the
#     recipe's and not hnas's. Dropout draws differ, so the curves agree to within noise.
#
# The peers (--peers, default all; one whose environment is missing is skipped, saying why): torch113, Debian's
# PyTorch 1.13 on OpenBLAS, eager, always f32 (installed when missing and root: without OpenBLAS it falls back
# to the reference BLAS, about 26x slower); from scripts/setup_peers.sh's environments under $HNAS_PEERS
# (default ~/.cache/hnas-peers), in --precision (bf16: torch.autocast): eager (PyTorch 2), compile
# (torch.compile, default mode) and ipex (intel_extension_for_pytorch). Environment: HNAS_BUILD_DIR (default
# build), PYTHON (default /usr/bin/python3, with torch), PEERS_TORCH_PYTHON, PEERS_IPEX_PYTHON. The runs use
# copies of the binaries, so a rebuild during a benchmark changes nothing; --out defaults to a fresh /tmp folder.
set -euo pipefail
cd "$(dirname "$0")/.."

command=${1:-}
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "$1"; }
die() { echo "bench.sh $command: $*" >&2; exit 2; }   # the command line
fail() { echo "bench.sh $command: $*" >&2; exit 1; }  # the machine or a run
python=${PYTHON:-/usr/bin/python3}
build_dir=${HNAS_BUILD_DIR:-build}
peers="torch113 eager compile ipex"

# options "NAME …" "FLAG …" WORDS ARGS…: sets the caller's variable of each --NAME VALUE (dashes as underscores;
# --set adds to the array settings) and of each --FLAG (to 1); with WORDS 1, other words go to the array positional.
options() {
  local names=" $1 " flags=" $2 " words=$3 option
  shift 3
  positional=()
  while (($#)); do
    option=${1#--}
    if [[ $1 == -h || $1 == --help ]]; then
      usage 0
    elif [[ $1 == --* && $names == *" $option "* ]]; then
      (($# >= 2)) || die "$1 needs a value"
      if [ "$option" = set ]; then settings+=("$2"); else printf -v "${option//-/_}" '%s' "$2"; fi
      shift 2
    elif [[ $1 == --* && $flags == *" $option "* ]]; then
      printf -v "${option//-/_}" '%s' 1
      shift
    elif [[ $1 != -* ]] && ((words)); then
      positional+=("$1")
      shift
    else
      die "unknown argument $1 (see --help)"
    fi
  done
}

# whole MIN VALUE…: each VALUE an integer ≥ MIN (0 or 1). one_of WHAT "VALUES" ALLOWED…: each word allowed.
whole() {
  local min=$1 value
  shift
  for value in "$@"; do
    if ! [[ $value =~ ^[0-9]+$ ]] || ((value < min)); then die "'$value' is not an integer ≥ $min"; fi
  done
}
one_of() {
  local what=$1 value
  for value in $2; do [[ " ${*:3} " == *" $value "* ]] || die "unknown $what $value (${*:3})"; done
}

# require_torch: $python (Debian's python3 with python3-torch) must import torch on OpenBLAS (Debian's
# libopenblas0-openmp); both packages are installed when missing and running as root.
require_torch() {
  local package missing=()
  for package in python3-torch libopenblas0-openmp; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  if ((${#missing[@]})); then
    [ "$(id -u)" -eq 0 ] || fail "${missing[*]} missing (Debian's PyTorch on OpenBLAS); install as root"
    echo "bench.sh $command: installing ${missing[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  "$python" -c "import torch" 2>/dev/null || fail "$python cannot import torch; it needs Debian's python3-torch (or set PYTHON)"
}

# build TARGET…: a Release build of the targets unless --no-build; builds on shared machines take turns through
# /tmp/build.lock when flock exists.
build() {
  ((no_build)) && return 0
  if [ ! -f "$build_dir/CMakeCache.txt" ]; then cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >/dev/null; fi
  local targets=() target
  for target in "$@"; do targets+=(--target "$target"); done
  if command -v flock >/dev/null; then
    flock /tmp/build.lock nice cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}" >/dev/null
  else
    cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}" >/dev/null
  fi
}

# copy_binaries BINARY…: the built binaries, which must exist, copied to $out/bin, which the runs use.
copy_binaries() {
  local binary
  mkdir -p "$out/bin"
  for binary in "$@"; do
    [ -x "$build_dir/$binary" ] || fail "$build_dir/$binary is missing (build it or drop --no-build)"
    cp "$build_dir/$binary" "$out/bin/"
  done
}

# select_peers: keeps those of $peers that can run here (torch113 must: require_torch stops otherwise); sets
# torch_python, ipex_python, and skipped ("peer: why" each, also printed and written to $out/skipped.txt later).
select_peers() {
  local peer why kept=() root=${HNAS_PEERS:-$HOME/.cache/hnas-peers}
  one_of peer "$peers" torch113 eager compile ipex
  torch_python=${PEERS_TORCH_PYTHON:-$root/torch-latest/bin/python}
  ipex_python=${PEERS_IPEX_PYTHON:-$root/torch-ipex/bin/python}
  skipped=()
  for peer in $peers; do
    why=""
    case "$peer" in
      torch113) require_torch ;;
      eager | compile) why=$(peer_missing "$torch_python" torch) ;;
      ipex) why=$(peer_missing "$ipex_python" intel_extension_for_pytorch) ;;
    esac
    if [ -n "$why" ]; then skipped+=("$peer: $why"); else kept+=("$peer"); fi
  done
  for why in ${skipped[@]+"${skipped[@]}"}; do echo "bench.sh $command: skipping $why" >&2; done
  peers=${kept[*]+"${kept[*]}"}
}

# peer_missing PYTHON MODULE: why PYTHON cannot run a PyTorch 2 peer that imports MODULE, or nothing.
peer_missing() {
  if [ ! -x "$1" ]; then
    echo "$1 is missing (run scripts/setup_peers.sh)"
  elif ! "$1" -c "import torch, sys; sys.exit(0 if int(torch.__version__.split('.')[0]) >= 2 else 1)" 2>/dev/null; then
    echo "$1 has no PyTorch 2 (run scripts/setup_peers.sh)"
  elif ! "$1" -c "import $2" >/dev/null 2>&1; then
    echo "$1 cannot import $2 (run scripts/setup_peers.sh)"
  fi
}

# peer_command PEER PRECISION SCRIPT: sets cmd to the start of one peer's command line, SCRIPT (a twin taking --peer
# and --precision) in its python; PyTorch 1.13 always eager and in f32.
peer_command() {
  if [[ "$1" == torch113 ]]; then
    cmd=("$python" "$3" --peer eager --precision f32)
  elif [[ "$1" == ipex ]]; then
    cmd=("$ipex_python" "$3" --peer "$1" --precision "$2")
  else
    cmd=("$torch_python" "$3" --peer "$1" --precision "$2")
  fi
}

# reversed WORD…: the words in reverse order, one a line (every other round runs the systems backwards).
reversed() { printf '%s\n' "$@" | tac; }

train() {
  local rounds=3 steps=20 warmup=3 threads=2 tasks="headline mlm" kinds="lnas dnas hnas" out="" no_build=0 precision=f32
  local quick=0 task kind round who ckpt peer hnas_run order
  options "rounds steps warmup threads tasks kinds out precision peers" "no-build quick" 0 "$@"
  if ((quick)); then rounds=1 steps=2 warmup=1; fi
  whole 1 "$rounds" "$steps" "$threads"
  whole 0 "$warmup"
  one_of task "$tasks" headline mlm
  one_of kind "$kinds" lnas dnas hnas
  one_of precision "$precision" f32 bf16
  select_peers
  local bench="$build_dir/hnas-bench"
  build hnas-bench
  [ -x "$bench" ] || fail "$bench is missing (build the hnas-bench target or drop --no-build)"
  out=${out:-$(mktemp -d /tmp/bench_train.XXXXXX)}
  mkdir -p "$out"
  local results="$out/results.jsonl" checks="$out/checks.jsonl"
  : >"$results"
  : >"$checks"
  export OMP_NUM_THREADS=$threads
  echo "bench.sh train: $(OMP_NUM_THREADS="" nproc --all) cores, $threads threads each, $rounds round(s) of $steps timed" \
    "steps after $warmup warm-up; peers: ${peers:-none}; output in $out" >&2
  # The same model on both sides.
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
  # Timing, alternating the frameworks (and which goes first) run by run.
  for ((round = 1; round <= rounds; round++)); do
    for task in $tasks; do
      for kind in $kinds; do
        hnas_run=("$bench" train --task "$task" --kind "$kind" --threads "$threads" --steps "$steps" --warmup "$warmup"
                  --precision "$precision" --matmul-bound)
        # shellcheck disable=SC2086,SC2206 # the peers are words
        if ((round % 2 == 0)); then mapfile -t order < <(reversed hnas $peers); else order=(hnas $peers); fi
        for who in "${order[@]}"; do
          if [[ "$who" == hnas ]]; then
            "${hnas_run[@]}" >>"$results"
          else
            peer_command "$who" "$precision" scripts/torch_reference.py
            "${cmd[@]}" --task "$task" --kind "$kind" --threads "$threads" --steps "$steps" --warmup "$warmup" \
              2>>"$out/peers.stderr" >>"$results"
          fi
        done
        echo "bench.sh train: round $round $task $kind done" >&2
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
        sys.exit(f"bench.sh train: torch did not run on OpenBLAS ({r.get('blas')}); the comparison would be unfair")
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
}

real() {
  local steps=400 rounds=2 threads=2 configs="gigaword mlm" baseline="" out="" no_build=0 precision=f32
  local config file settings round system systems order
  options "steps rounds threads configs baseline precision peers out" "no-build" 0 "$@"
  whole 1 "$steps" "$rounds" "$threads"
  one_of config "$configs" gigaword mlm
  [ -z "$baseline" ] || [ -x "$baseline" ] || die "--baseline $baseline is not an executable"
  one_of precision "$precision" f32 bf16
  select_peers
  if [ ! -x /usr/bin/time ]; then
    [ "$(id -u)" -eq 0 ] || fail "GNU time (/usr/bin/time, Debian's time) is missing; install it as root"
    echo "bench.sh real: installing GNU time" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null
  fi
  build hnas hnas-bench
  out=${out:-$(mktemp -d /tmp/bench_real.XXXXXX)}
  copy_binaries hnas hnas-bench
  [ -z "$baseline" ] || cp "$baseline" "$out/bin/hnas-baseline"
  local results="$out/results.jsonl"
  : >"$results"
  export OMP_NUM_THREADS=$threads
  echo "bench.sh real: $(OMP_NUM_THREADS="" nproc --all) cores, $threads threads, $rounds rounds of $steps steps per run" \
    "in $precision; peers: ${peers:-none}; output in $out" >&2
  for config in $configs; do
    case "$config" in
      gigaword) file=configs/gigaword.json settings=(train.steps="$steps" data.batch_sentences=64 train.learning_rate=0.001) ;;
      mlm) file=configs/mlm.json settings=(train.steps="$steps") ;;
    esac
    rm -f "$out/$config.batches"
    # shellcheck disable=SC2206 # the peers are words
    systems=(hnas $peers)
    [ -z "$baseline" ] || systems+=(baseline)
    for round in $(seq "$rounds"); do
      if ((round % 2 == 0)); then mapfile -t order < <(reversed "${systems[@]}"); else order=("${systems[@]}"); fi
      for system in "${order[@]}"; do
        echo "bench.sh real: $config, round $round: $system" >&2
        case "$system" in
          hnas) real_hnas "$config-hnas-$round" "$out/bin/hnas" ;;
          baseline) real_hnas "$config-baseline-$round" "$out/bin/hnas-baseline" ;;
          *) real_peer "$system" "$config-$system-$round" ;;
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
}

# real_hnas NAME BINARY: one `hnas train` run of $file with $settings in $precision, appended to results as a JSON
# line. NAME is CONFIG-IMPL-ROUND.
real_hnas() {
  local name=$1 binary=$2 extra=()
  if [[ "$precision" == bf16 ]]; then extra=(train.precision=bf16); fi
  rm -rf "${out:?}/$name"
  /usr/bin/time -v -o "$out/$name.time" "$binary" train --config "$file" --out "$out/$name" --set "${settings[@]}" \
    "${extra[@]}" >"$out/$name.log" 2>&1 || fail "$name failed; see $out/$name.log"
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

# real_peer PEER NAME: the twin of PEER trained on $config's batches (its step-0 loss checked), appended to results
# as a JSON line.
real_peer() {
  local peer=$1 name=$2
  peer_command "$peer" "$precision" scripts/torch_reference.py
  /usr/bin/time -v -o "$out/$name.time" "${cmd[@]}" --batches "$out/$config.batches" --threads "$threads" \
    >"$out/$name.json" 2>"$out/$name.log" || fail "the $peer twin failed; see $out/$name.log"
  "$python" - "$out" "$name" "$peer" >>"$results" <<'EOF'
import json, re, sys
out, name, peer = sys.argv[1], sys.argv[2], sys.argv[3]
twin = json.load(open(f"{out}/{name}.json"))
relative = abs(twin["loss0_eval"] - twin["hnas_loss0_eval"]) / abs(twin["hnas_loss0_eval"])
verdict = "ok" if relative <= 1e-4 else "MISMATCH: not the same model"
print(f"bench.sh real: {name}: step-0 loss (f32, dropout off) {twin['loss0_eval']:.7f}, hnas {twin['hnas_loss0_eval']:.7f} "
      f"(relative {relative:.1e}) {verdict}", file=sys.stderr)
if relative > 1e-4:
    sys.exit(1)
if peer == "torch113" and not any("openblas" in library for library in twin["blas"]):
    sys.exit(f"bench.sh real: torch did not run on OpenBLAS ({twin['blas']}); the comparison would be unfair")
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

decode() {
  local checkpoint="" steps=400 beams="1 4" count=1951 batch=32 rounds=3 threads=2 out="" no_build=0 precision=f32
  local round beam peer
  options "checkpoint steps beams count batch rounds threads precision peers out" "no-build" 0 "$@"
  # shellcheck disable=SC2086 # the beams are words
  whole 1 "$steps" "$count" "$batch" "$rounds" "$threads" $beams
  [ -z "$checkpoint" ] || [ -f "$checkpoint" ] || die "--checkpoint $checkpoint is not a file"
  one_of precision "$precision" f32 bf16
  select_peers
  build hnas hnas-bench
  out=${out:-$(mktemp -d /tmp/bench_decode.XXXXXX)}
  copy_binaries hnas hnas-bench
  export OMP_NUM_THREADS=$threads
  echo "bench.sh decode: $(OMP_NUM_THREADS="" nproc --all) cores, $threads threads; peers: ${peers:-none} in" \
    "$precision; output in $out" >&2
  if [ -z "$checkpoint" ]; then
    echo "bench.sh decode: training a headline model for $steps steps" >&2
    rm -rf "${out:?}/run"
    "$out/bin/hnas" train --config configs/gigaword.json --out "$out/run" \
      --set train.steps="$steps" data.batch_sentences=64 train.learning_rate=0.001 >"$out/train.log" 2>&1 \
      || fail "training failed; see $out/train.log"
    checkpoint=$(ls -t "$out"/run/checkpoints/*.ckpt | head -n 1)
  fi
  local results="$out/results.jsonl"
  : >"$results"
  for round in $(seq "$rounds"); do
    for beam in $beams; do
      echo "bench.sh decode: round $round, beam $beam" >&2
      "$out/bin/hnas-bench" decode --checkpoint "$checkpoint" --count "$count" --batch "$batch" --beam "$beam" \
        --precision "$precision" --out "$out/beam$beam.sources" >>"$results" 2>"$out/hnas.log" \
        || fail "hnas-bench decode failed; see $out/hnas.log"
      for peer in $peers; do
        peer_command "$peer" "$precision" scripts/torch_reference.py
        "${cmd[@]}" --sources "$out/beam$beam.sources" --threads "$threads" >>"$results" 2>"$out/$peer.log" \
          || fail "the $peer twin failed; see $out/$peer.log"
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
        sys.exit(f"bench.sh decode: torch did not run on OpenBLAS ({r['blas']}); the comparison would be unfair")
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
}

ddp() {
  local configs="tiny gigaword" link="" steps=60 skip=20 rounds=2 rate=1gbit delay=0.5ms baseline="" out="" no_build=0
  local bf16_sums=0 tool config file vocab settings variants variant extra binary round speed
  options "configs link steps skip rounds rate delay baseline out" "no-build bf16-sums" 0 "$@"
  local link_kind=${link:-pair}
  whole 1 "$steps" "$skip" "$rounds"
  ((skip < steps)) || die "--skip $skip must be below --steps $steps"
  [[ "$rate" =~ ^[0-9.]+(bit|kbit|mbit|gbit)$ ]] || die "--rate $rate is not a rate like 1gbit or 100mbit"
  [[ "$delay" =~ ^[0-9.]+(us|ms|s)$ ]] || die "--delay $delay is not a time like 0.5ms"
  one_of link "$link_kind" pair loopback
  one_of config "$configs" tiny gigaword
  [ -z "$baseline" ] || [ -x "$baseline" ] || die "--baseline $baseline is not an executable"
  [ "$(id -u)" -eq 0 ] || fail "needs root for network namespaces and tc"
  for tool in mpirun unshare ip tc taskset; do
    command -v "$tool" >/dev/null || fail "$tool is missing (openmpi-bin, util-linux, iproute2)"
  done
  (($(nproc) >= 2)) || fail "needs 2 cores, one per rank; this machine gives $(nproc)"
  unshare -n true 2>/dev/null || fail "cannot create a network namespace here (unshare -n failed)"
  build hnas
  out=${out:-$(mktemp -d /tmp/bench_ddp.XXXXXX)}
  copy_binaries hnas
  [ -z "$baseline" ] || cp "$baseline" "$out/bin/hnas_baseline"
  local results="$out/results.jsonl"
  : >"$results"
  # The slow link: netem gives rate and delay; a kernel without sch_netem gets tbf's rate alone.
  if unshare -n sh -c "ip link set lo up && tc qdisc add dev lo root netem delay $delay rate $rate" 2>/dev/null; then
    slow_qdisc="netem delay $delay rate $rate" slow_link="$rate, $delay"
  else
    slow_qdisc="tbf rate $rate burst 256kb latency 20ms" slow_link="$rate, no added delay"
    echo "bench.sh ddp: this kernel has no sch_netem: the slow link is limited to $rate (tbf) without the $delay delay" >&2
  fi
  echo "bench.sh ddp: 2 ranks, 1 thread each, $steps steps (timed from step $skip), $rounds rounds; $link_kind link," \
    "slowed to $slow_link; output in $out" >&2
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
  # The pair link: namespaces and addresses named after this script's pid, removed on exit.
  pair=hnasddp$$ subnet=10.231.0.0/24 address_a=10.231.0.1 address_b=10.231.0.2
  if [ "$link_kind" = pair ]; then
    trap 'ip netns del "${pair}a" 2>/dev/null; ip netns del "${pair}b" 2>/dev/null' EXIT
    ip netns add "${pair}a" && ip netns add "${pair}b"
    ip link add "${pair}a" type veth peer name "${pair}b"
    for end in a b; do
      ip link set "$pair$end" netns "$pair$end"
      ip -n "$pair$end" link set lo up
      ip -n "$pair$end" link set "$pair$end" up
    done
    ip -n "${pair}a" addr add "$address_a/24" dev "${pair}a"
    ip -n "${pair}b" addr add "$address_b/24" dev "${pair}b"
    # mpirun starts rank 0 itself (in namespace a, on core 0) and the second "host" through this
    # launcher, which Open MPI calls as it would ssh: the host, then the command line to run there.
    cat >"$out/launch_in_b" <<LAUNCHER
#!/bin/sh
shift
exec ip netns exec ${pair}b taskset -c 1 sh -c "\$*"
LAUNCHER
    chmod +x "$out/launch_in_b"
  fi
  for config in $configs; do
    case "$config" in
      tiny) file=configs/gigaword_tiny.json vocab=4000 settings=() ;;
      gigaword) file=configs/gigaword.json vocab=8000 settings=(data.batch_sentences=64) ;;
    esac
    "$out/bin/hnas" vocab --input data/gigaword/derived/train_all.article.txt data/gigaword/derived/train_all.title.txt \
      --model-prefix "$out/$config-tokenizer" --vocab-size "$vocab" >"$out/$config-tokenizer.log" 2>&1 \
      || fail "training the $config tokenizer failed; see $out/$config-tokenizer.log"
    settings+=(tokenizer.model="$out/$config-tokenizer.model" train.steps="$steps" train.log_every="$skip"
               validation.every=0 validation.max_batches=1 validation.decode_examples=0 validation.metric=loss)
    # Variants: a binary's name, with "bf16" appended when it sums in bf16.
    variants=(hnas)
    [ -z "$baseline" ] || variants+=(hnas_baseline)
    if ((bf16_sums)); then for variant in "${variants[@]}"; do variants+=("${variant}bf16"); done; fi
    for ((round = 1; round <= rounds; ++round)); do
      for variant in "${variants[@]}"; do
        extra=() binary=$variant
        [[ "$variant" == *bf16 ]] && extra=(train.bf16_gradient_sums=true) binary=${variant%bf16}
        for speed in fast slow; do
          echo "bench.sh ddp: $config round $round: $variant, $speed link" >&2
          ddp_run "$config-$variant-$speed-$round" "$out/bin/$binary" "$speed" "$file" "${settings[@]}" "${extra[@]}"
        done
      done
    done
  done
  "$python" - "$results" "$rate" "$delay" "$slow_link" "$link_kind" <<'EOF'
import json, re, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
rate_text, delay_text, link, link_kind = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
groups = {}
for r in runs:
    config, binary, speed, _ = r["name"].split("-")
    groups.setdefault((config, binary), {}).setdefault(speed, []).append(r)

def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None

def cell(value, digits=4):
    return "–" if value is None else f"{value:.{digits}f}"

print("| config | binary | s/step fast link | s/step slow link | slow / fast | gradient wait s/step fast | slow | "
      "backward s/step | gradient floats | last bucket |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for (config, binary), links in groups.items():
    fast, slow = links["fast"], links["slow"]
    ratios = [s["step_seconds"] / f["step_seconds"] for f, s in zip(fast, slow)]
    floats = fast[0]["gradient_floats"]
    print(f"| {config} | {binary} | {cell(median([r['step_seconds'] for r in fast]))} | "
          f"{cell(median([r['step_seconds'] for r in slow]))} | {statistics.median(ratios):.3f} "
          f"[{min(ratios):.3f}–{max(ratios):.3f}] | {cell(median([r['wait_seconds'] for r in fast]))} | "
          f"{cell(median([r['wait_seconds'] for r in slow]))} | {cell(median([r['backward_seconds'] for r in fast]))} | "
          f"{floats or '–'} | {fast[0]['last_bucket_floats'] or '–'} |")

# The model (docs/distributed.md, "Scaling"): ring all-reduce over N machines, each with a full-duplex
# link of `rate` and `delay` per message; weak scaling (each machine keeps this run's per-rank batch,
# so its compute per step stays as measured); the sums overlap the backward pass except the last
# bucket's, whose gradients are final only at its end.
units = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
number, unit = re.fullmatch(r"([0-9.]+)([a-z]+)", rate_text).groups()
bytes_per_second = float(number) * units[unit] / 8
number, unit = re.fullmatch(r"([0-9.]+)(ms|us|s)", delay_text).groups()
latency = float(number) * {"s": 1, "ms": 1e-3, "us": 1e-6}[unit]

def step(compute, backward, floats, tail_floats, machines, bandwidth, alpha, bytes_per_float):
    share = 2 * (machines - 1) / machines
    total = share * bytes_per_float * floats / bandwidth + 2 * (machines - 1) * alpha
    tail = share * bytes_per_float * tail_floats / bandwidth + 2 * (machines - 1) * alpha
    return compute + max(tail, total - backward)

# On the loopback both directions share one queue: half the rate each way.
here_link = ("veth pair, full duplex" if link_kind == "pair" else "loopback, both directions sharing the rate")
here_bandwidth = bytes_per_second if link_kind == "pair" else bytes_per_second / 2

print(f"\nModel: step time over its compute alone; ring all-reduce; full-duplex links of {rate_text} (and 10x) "
      f"with {delay_text} per message; weak scaling from the fast-link runs' compute (step minus gradient wait), "
      f"backward time, and the last bucket's floats summed after it. The first row per config is this run's "
      f"2 ranks on its {here_link} ({link}), beside the measured slow / fast.")
print("| config | machines | link | f32 sums | bf16 sums | measured f32 | measured bf16 |")
print("| --- | ---: | --- | ---: | ---: | ---: | ---: |")

def measured_ratio(config, binary):
    links = groups.get((config, binary))
    if not links:
        return ""
    return f"{statistics.median(s['step_seconds'] / f['step_seconds'] for f, s in zip(links['fast'], links['slow'])):.2f}"

for (config, binary), links in groups.items():
    fast = links["fast"]
    if binary != "hnas" or fast[0]["gradient_floats"] is None:
        continue
    compute = median([r["step_seconds"] - r["wait_seconds"] for r in fast])
    backward = median([r["backward_seconds"] for r in fast])
    floats = fast[0]["gradient_floats"]
    tail = fast[0]["last_bucket_floats"]
    alpha_here = 0.0 if "no added delay" in link else latency
    here = [step(compute, backward, floats, tail, 2, here_bandwidth, alpha_here, b) / compute for b in (4, 2)]
    print(f"| {config} | 2 | this {link_kind} | {here[0]:.2f} | {here[1]:.2f} | {measured_ratio(config, 'hnas')} | "
          f"{measured_ratio(config, 'hnasbf16')} |")
    for machines in (8, 64):
        for scale, name in ((1, rate_text), (10, f"10x {rate_text}")):
            model = [step(compute, backward, floats, tail, machines, scale * bytes_per_second, latency, b) / compute
                     for b in (4, 2)]
            print(f"| {config} | {machines} | {name} | {model[0]:.2f} | {model[1]:.2f} | | |")
EOF
}

# set_link SPEED: the link as it is (fast) or slowed (slow), on every queue the ranks' traffic passes.
set_link() {
  [ "$link_kind" = pair ] || return 0
  for end in a b; do
    tc -n "$pair$end" qdisc del dev "$pair$end" root 2>/dev/null || true
    # shellcheck disable=SC2086 # the qdisc and its parameters are words
    [ "$1" = fast ] || tc -n "$pair$end" qdisc add dev "$pair$end" root $slow_qdisc
  done
}

# ddp_run NAME BINARY SPEED CONFIG SETTINGS...: one 2-rank run (SPEED: fast or slow), appended to results as a
# JSON line.
ddp_run() {
  local name=$1 binary=$2 link=$3 config=$4
  shift 4
  rm -rf "${out:?}/$name"
  local train=("$binary" train --config "$config" --out "$out/$name" --set "$@")
  if [ "$link_kind" = pair ]; then
    set_link "$link"
    ip netns exec "${pair}a" taskset -c 0 mpirun -np 2 --host "$address_a:1,$address_b:1" --bind-to none \
      --mca plm_rsh_agent "$out/launch_in_b" --mca btl self,tcp --mca btl_tcp_if_include "$subnet" \
      --mca oob_tcp_if_include "$subnet" "${train[@]}" >"$out/$name.log" 2>&1 || fail "$name failed; see $out/$name.log"
  else
    local qdisc=""
    [ "$link" = slow ] && qdisc="tc qdisc add dev lo root $slow_qdisc &&"
    unshare -n sh -c "ip link set lo up && $qdisc exec mpirun -np 2 --bind-to core --mca btl self,tcp \
        --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \"\$@\"" sh "${train[@]}" >"$out/$name.log" 2>&1 \
      || fail "$name failed; see $out/$name.log"
  fi
  "$python" - "$out" "$name" "$link" "$skip" "$steps" >>"$results" <<'EOF'
import json, sys
out, name, link, skip, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
progress = {r["step"]: r for r in map(json.loads, open(f"{out}/{name}/metrics.jsonl")) if "elapsed_seconds" in r}
first, last = progress[skip], progress[steps]
seconds = (last["elapsed_seconds"] - first["elapsed_seconds"]) / (steps - skip)
# Each log's gradient wait is the mean over the steps since the previous log; builds before the
# overlap (a --baseline) did not record it.
windows = [(s, r["distributed"]) for s, r in sorted(progress.items()) if skip < s <= steps and "distributed" in r]
previous = [skip] + [s for s, _ in windows[:-1]]
def mean(key):
    if not windows or any(key not in d for _, d in windows):
        return None
    return sum(d[key] * (s - p) for (s, d), p in zip(windows, previous)) / (steps - skip)
last = windows[-1][1] if windows else {}
print(json.dumps({"name": name, "link": link, "step_seconds": seconds, "wait_seconds": mean("gradient_wait_seconds_per_step"),
                  "backward_seconds": mean("backward_seconds_per_step"), "gradient_floats": last.get("gradient_floats"),
                  "last_bucket_floats": last.get("gradient_floats_last_bucket")}))
EOF
}

profile() {
  local task=headline kind=lnas steps=15 warmup=2 threads=2 precision=f32 out=""
  options "task kind steps warmup threads precision out" "" 0 "$@"
  command -v perf >/dev/null || fail "perf is missing: apt-get install linux-perf"
  local bench="$build_dir/hnas-bench"
  [ -x "$bench" ] || fail "$bench is missing; build the hnas-bench target first"
  out=${out:-$(mktemp -d /tmp/profile_train.XXXXXX)}
  mkdir -p "$out"
  local run="$task-$kind-$precision"
  # oneDNN's JIT kernels are named for perf through DNNL_JIT_PROFILE=1 (a /tmp/perf-PID.map).
  OMP_NUM_THREADS=$threads DNNL_JIT_PROFILE=1 perf record -q -g -F 499 -o "$out/perf-$run.data" -- \
    "$bench" train --task "$task" --kind "$kind" --threads "$threads" --steps "$steps" --warmup "$warmup" \
    --precision "$precision" >"$out/run-$run.json"
  perf report -i "$out/perf-$run.data" --no-children --sort dso,sym --stdio -g none --percent-limit 0 2>/dev/null \
    >"$out/report-$run.txt"
  echo "bench.sh profile: $(cat "$out/run-$run.json")"
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
}

bf16() {
  local steps=500 window=50 out=runs/check_bf16 no_build=0 run config name kind precision tokenizer results=()
  options "steps window out" "no-build" 1 "$@"
  whole 1 "$steps" "$window"
  # Each run: a config, optionally with the encoder's attention kind after a colon.
  local configs=("${positional[@]}")
  ((${#configs[@]})) || configs=(configs/gigaword_tiny.json:lnas configs/gigaword_tiny.json:hnas configs/mlm_tiny.json)
  build hnas
  [ -x "$build_dir/hnas" ] || fail "$build_dir/hnas is missing (build the hnas target or drop --no-build)"
  # Cheap validation and checkpoints: a config's validation or checkpoint step inside the first N steps
  # would only cost time, and neither changes the training stream.
  local cheap=(--set validation.every=0 --set validation.max_batches=1 --set checkpoint.every=1000000 --set train.log_every=1)
  for run in "${configs[@]}"; do
    config=${run%%:*} kind=() name=$(basename "$config" .json)
    if [ "$run" != "$config" ]; then
      kind=(--set "model.attention.encoder.kind=${run#*:}")
      name="${name}_${run#*:}"
    fi
    rm -rf "${out:?}/$name"
    mkdir -p "$out/$name"
    for precision in f32 bf16; do
      tokenizer=()
      if [ "$precision" = bf16 ]; then tokenizer=(--set "tokenizer.model=$out/$name/f32/tokenizer.model"); fi
      echo "== $name, $precision: $steps steps" >&2
      "$build_dir/hnas" train --config "$config" --out "$out/$name/$precision" --stop-after "$steps" \
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
}

twin() {
  local steps=1000 out="" threads=2 settings=()
  options "steps out threads set" "" 1 "$@"
  ((${#positional[@]} == 1)) || die "usage: scripts/bench.sh twin CONFIG [--steps N] [--out DIR] [--threads N] [--set key=value …]"
  local config=${positional[0]}
  [ -f "$config" ] || die "no config file $config"
  whole 1 "$steps" "$threads"
  require_torch  # before hnas trains, not after
  local binary
  for binary in hnas hnas-bench; do
    [ -x "$build_dir/$binary" ] || fail "$build_dir/$binary is missing; run scripts/setup.sh"
  done
  out=${out:-runs/twin_$(basename "$config" .json)}
  mkdir -p "$out"
  export OMP_NUM_THREADS=$threads
  rm -rf "${out:?}/hnas"
  echo "bench.sh twin: hnas trains $config for $steps steps (log $out/hnas.log)" >&2
  "$build_dir/hnas" train --config "$config" --out "$out/hnas" \
    --set train.steps="$steps" train.log_every=50 ${settings[@]+"${settings[@]}"} >"$out/hnas.log" 2>&1 ||
    fail "hnas failed; see $out/hnas.log"
  "$build_dir/hnas-bench" batches --run "$out/hnas" --steps "$steps" --out "$out/run.batches" >/dev/null
  echo "bench.sh twin: the twin trains on the same batches (log $out/twin.log)" >&2
  "$python" scripts/torch_reference.py --batches "$out/run.batches" --steps "$steps" --threads "$threads" \
    >"$out/twin.json" 2>"$out/twin.log" || fail "the twin failed; see $out/twin.log"
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
    sys.exit(f"bench.sh twin: step-0 loss {twin['loss0_eval']:.7f} against hnas's {twin['hnas_loss0_eval']:.7f}: not the same model")
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
}

case "$command" in
  train | real | decode | ddp | profile | bf16 | twin) shift; "$command" "$@" ;;
  -h | --help) usage 0 ;;
  *) usage 2 >&2 ;;
esac
