#!/usr/bin/env bash
# hnas's speed and numerics measured, one subcommand each; what each measures and how to read it is in
# docs/performance.md ("How to measure"), docs/distributed.md (ddp) and the README's command table.
#
#   scripts/bench.sh train [--quick] [--rounds 3] [--steps 20] [--warmup 3] [--threads 2] [--tasks "headline mlm"]
#                          [--kinds "lnas dnas hnas"] [--precision f32|bf16] [--peers "…"] [--out DIR] [--no-build]
#     hnas-bench train beside its PyTorch peers on the reference workloads, each peer first checked to build the
#     same model; --quick: 1 round of 2 timed steps after 1 warm-up step.
#   scripts/bench.sh real [--steps 400] [--rounds 2] [--threads 2] [--configs "gigaword mlm"] [--baseline BIN]
#                         [--precision f32|bf16] [--peers "…"] [--out DIR] [--no-build]
#     `hnas train` on the bundled data beside each peer trained on the very batches that run drew (--baseline:
#     another hnas binary too); config paper is configs/gigaword_paper.json with 16,000 pieces.
#   scripts/bench.sh decode [--checkpoint FILE] [--steps 400] [--beams "1 4"] [--count 1951] [--batch 32]
#                           [--rounds 3] [--threads 2] [--precision f32|bf16] [--peers "…"] [--out DIR] [--no-build]
#     hnas-bench decode's beam search beside the peers' on the same model and batches; without --checkpoint it
#     first trains configs/gigaword.json for --steps.
#   scripts/bench.sh ddp [--configs "tiny gigaword"] [--link pair|loopback] [--steps 60] [--skip 20] [--rounds 2]
#                        [--rate 1gbit] [--delay 0.5ms] [--baseline BIN] [--bf16-sums] [--out DIR] [--no-build]
#     2 ranks of `hnas train` in network namespaces of their own over a fast and a slowed link, timed from step
#     --skip on. Needs root, Open MPI, iproute2 and taskset.
#   scripts/bench.sh profile [--task headline|mlm] [--kind lnas|dnas|hnas] [--steps 15] [--warmup 2] [--threads 2]
#                            [--precision f32|bf16] [--out DIR]
#     `perf record -g` of hnas-bench train's timed steps, the samples' self time in families. Needs linux-perf and
#     hnas-bench.
#   scripts/bench.sh regions [--task headline|mlm] [--kind lnas|dnas|hnas] [--steps 16] [--warmup 2] [--threads 2]
#                            [--precision f32|bf16] [--out DIR]
#     a timed step's wall time inside OpenMP's parallel regions and between them (scripts/openmp_regions.c,
#     preloaded): regions a step, ms outside any, the products oneDNN ran on one thread. Needs gcc and hnas-bench.
#   scripts/bench.sh bf16 [--steps 500] [--window 50] [--out DIR] [--no-build] [CONFIG[:KIND] …]
#     the first N steps of each config (default the tiny ones; KIND sets the encoder's) in f32 and in bf16, their
#     W-step moving-average losses checked to agree within 1 %.
#   scripts/bench.sh twin CONFIG [--steps 1000] [--out DIR] [--threads 2] [--set key=value …]
#     a headline or mlm config beside a PyTorch twin trained on the batches hnas drew: the mean loss of every 50
#     steps side by side in OUT/curves.md (default OUT runs/twin_<config>).
#   scripts/bench.sh data [--sizes "0.1 1 10"] [--steps 30] [--warmup 5] [--ranks "1 2"] [--threads 2] [--keep-corpus]
#                         [--out DIR] [--no-build]
#     configs/pretrain.json in f32 on corpora of the bundled texts of each size (GB), tokenized at the start and `hnas prepare`d
#     (data.prepared): seconds to step 1, steps/s after --warmup, peak RssAnon and VmHWM per rank, prepare's MB/s and MB.
#
# The peers (--peers, default all; one whose environment is missing is skipped, saying why): torch113, Debian's
# PyTorch 1.13 on OpenBLAS, eager, always f32 (installed when missing and root); from scripts/setup_peers.sh's
# environments under $HNAS_PEERS (default ~/.cache/hnas-peers), in --precision: eager (PyTorch 2), compile
# (torch.compile) and ipex. Environment: HNAS_BUILD_DIR (default build), PYTHON (default /usr/bin/python3, with
# torch), PEERS_TORCH_PYTHON, PEERS_IPEX_PYTHON. The runs use copies of the binaries, so a rebuild during a
# benchmark changes nothing; --out defaults to a fresh /tmp folder.
set -euo pipefail
cd "$(dirname "$0")/.."

command=${1:-}
die() { echo "bench.sh $command: $*" >&2; exit 2; }   # the command line
fail() { echo "bench.sh $command: $*" >&2; exit 1; }  # the machine or a run
source scripts/options.sh
python=${PYTHON:-/usr/bin/python3}
build_dir=${HNAS_BUILD_DIR:-build}
peers="torch113 eager compile ipex"

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
  local targets=() target lock=()
  for target in "$@"; do targets+=(--target "$target"); done
  if command -v flock >/dev/null; then lock=(flock /tmp/build.lock nice); fi
  ${lock[@]+"${lock[@]}"} cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}" >/dev/null
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
  case "$1" in
    torch113) cmd=("$python" "$3" --peer eager --precision f32) ;;
    ipex) cmd=("$ipex_python" "$3" --peer "$1" --precision "$2") ;;
    *) cmd=("$torch_python" "$3" --peer "$1" --precision "$2") ;;
  esac
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
  "$python" scripts/summarize.py bench train-check "$checks"
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
  "$python" scripts/summarize.py bench train "$results" "$out/skipped.txt"
}

real() {
  local steps=400 rounds=2 threads=2 configs="gigaword mlm" baseline="" out="" no_build=0 precision=f32
  local config file settings round system systems order
  options "steps rounds threads configs baseline precision peers out" "no-build" 0 "$@"
  whole 1 "$steps" "$rounds" "$threads"
  one_of config "$configs" gigaword mlm paper
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
      # The bundled pairs train 23,992 pieces at most, not the config's 30,522 (docs/performance.md).
      paper) file=configs/gigaword_paper.json settings=(train.steps="$steps" tokenizer.vocab_size=16000 model.vocab_size=16000
                                                        validation.every=0) ;;
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
  "$python" scripts/summarize.py bench real "$results" "$steps" "$out/skipped.txt"
}

# real_hnas NAME BINARY: one `hnas train` run of $file with $settings in $precision, appended to results as a JSON
# line. NAME is CONFIG-IMPL-ROUND.
real_hnas() {
  local name=$1 binary=$2 extra=()
  if [[ "$precision" == bf16 ]]; then extra=(train.precision=bf16); fi
  rm -rf "${out:?}/$name"
  /usr/bin/time -v -o "$out/$name.time" "$binary" train --config "$file" --out "$out/$name" --set "${settings[@]}" \
    "${extra[@]}" >"$out/$name.log" 2>&1 || fail "$name failed; see $out/$name.log"
  "$python" scripts/summarize.py bench real-hnas "$out" "$name" "$steps" "$precision" >>"$results"
}

# real_peer PEER NAME: the twin of PEER trained on $config's batches (its step-0 loss checked), appended to results
# as a JSON line.
real_peer() {
  local peer=$1 name=$2
  peer_command "$peer" "$precision" scripts/torch_reference.py
  /usr/bin/time -v -o "$out/$name.time" "${cmd[@]}" --batches "$out/$config.batches" --threads "$threads" \
    >"$out/$name.json" 2>"$out/$name.log" || fail "the $peer twin failed; see $out/$name.log"
  "$python" scripts/summarize.py bench real-peer "$out" "$name" "$peer" >>"$results"
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
  "$python" scripts/summarize.py bench decode "$results" "$out/skipped.txt"
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
  "$python" scripts/summarize.py bench ddp "$results" "$rate" "$delay" "$slow_link" "$link_kind"
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
  "$python" scripts/summarize.py bench ddp-run "$out" "$name" "$link" "$skip" "$steps" >>"$results"
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
  # oneDNN's JIT kernels are named for perf through DNNL_JIT_PROFILE=1 (a /tmp/perf-PID.map). perf starts
  # disabled and hnas-bench enables it for the timed steps alone (start-up and warm-up fault in every page).
  rm -f "$out/perf-control" "$out/perf-ack"
  mkfifo "$out/perf-control" "$out/perf-ack"
  OMP_NUM_THREADS=$threads DNNL_JIT_PROFILE=1 perf record -q -g -F 499 --delay=-1 \
    --control "fifo:$out/perf-control,$out/perf-ack" -o "$out/perf-$run.data" -- \
    "$bench" train --task "$task" --kind "$kind" --threads "$threads" --steps "$steps" --warmup "$warmup" \
    --precision "$precision" --perf-fifos "$out/perf-control" "$out/perf-ack" >"$out/run-$run.json"
  # -n: sample counts, from which the shares are computed (perf's per-symbol percentages are rounded, and
  # thousands of one-sample JIT addresses each rounded up summed to 110 %).
  perf report -i "$out/perf-$run.data" --no-children --sort dso,sym --stdio -g none --percent-limit 0 -n 2>/dev/null \
    >"$out/report-$run.txt"
  echo "bench.sh profile: $(cat "$out/run-$run.json")"
  "$python" scripts/summarize.py bench profile "$out/report-$run.txt"
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
  "$python" scripts/summarize.py bench bf16 "$window" "$steps" "${results[@]}"
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
  "$python" scripts/summarize.py bench twin "$out" "$config" "$steps"
}

data() {
  local sizes="0.1 1 10" steps=30 warmup=5 ranks=1 threads=2 out="" no_build=0 keep_corpus=0 size rank dir source total turn
  options "sizes steps warmup ranks threads out" "no-build keep-corpus" 0 "$@"
  # shellcheck disable=SC2086 # the ranks are words
  whole 1 "$steps" "$warmup" "$threads" $ranks
  ((warmup < steps)) || die "--warmup $warmup must be below --steps $steps"
  for size in $sizes; do [[ $size =~ ^[0-9]*\.?[0-9]+$ ]] || die "--sizes: '$size' is not a number of GB"; done
  [ "$ranks" = 1 ] || command -v mpirun >/dev/null || fail "--ranks above 1 needs mpirun (openmpi-bin)"
  build hnas
  out=${out:-$(mktemp -d /tmp/bench_data.XXXXXX)}
  copy_binaries hnas
  : >"$out/results.jsonl"
  echo "bench.sh data: corpora of $sizes GB on ranks $ranks, $steps steps (steps/s after $warmup); output in $out" >&2
  local sources=(corpus/sotu.txt:line corpus/moby_dick.txt:block gigaword/derived/train_all.article.txt:line corpus/world_english_bible.txt:block)
  for size in $sizes; do
    dir=$out/corpus-$size total=0 turn=0
    mkdir -p "$dir" && : >"$dir/line.txt" && : >"$dir/block.txt"
    while ((total < $(awk "BEGIN { printf \"%.0f\", $size * 1e9 }"))); do
      source=${sources[turn++ % 4]}
      { cat "data/${source%:*}"; [[ $source == *line ]] || echo; } >>"$dir/${source#*:}.txt"
      total=$(($(stat -c %s "$dir/line.txt") + $(stat -c %s "$dir/block.txt")))
    done
    local settings=(tokenizer.model=data/pretrained/tokenizer.model train.steps="$steps" train.log_every=1 train.threads="$threads" train.precision=f32
      "data.train_sources=[{\"path\":\"$dir/line.txt\",\"unit\":\"line\"},{\"path\":\"$dir/block.txt\",\"unit\":\"block\"}]"
      validation.every=0 "data.valid_sources=[]" checkpoint.every=1000000)
    local fields="\"gb\":$size,\"bytes\":$total,\"steps\":$steps,\"warmup\":$warmup"
    for rank in $ranks; do
      data_run memory "$rank" train --out "$out/memory-$size-$rank"
      [ -e "$out/prepared-$size" ] || data_run prepare 1 prepare --output "$out/prepared-$size" --threads "$threads"
      data_run prepared "$rank" train --out "$out/prepared-$size-$rank" --set "data.prepared=$out/prepared-$size"
    done
    ((keep_corpus)) || rm -rf "${dir:?}" "$out/prepared-$size"
  done
  "$python" scripts/summarize.py bench data "$out/results.jsonl" | tee "$out/summary.md"
}

# data_run RUN RANKS COMMAND --out DIR …: `hnas COMMAND …` with $settings on RANKS ranks, sampled, into results.jsonl.
data_run() {
  local launch=("$out/bin/hnas") dir=$5
  (($2 == 1)) || launch=(mpirun --allow-run-as-root -np "$2" "$out/bin/hnas")
  echo "bench.sh data: $size GB, $1, $2 rank(s)" >&2
  rm -rf "${dir:?}"
  "$python" scripts/summarize.py bench data-run "{$fields,\"run\":\"$1\",\"ranks\":$2,\"dir\":\"$dir\"}" "$out/bin/hnas" \
    "$dir.log" "${launch[@]}" "${@:3}" --config configs/pretrain.json --set "${settings[@]}" >>"$out/results.jsonl"
}

regions() {
  local task=headline kind=hnas steps=16 warmup=2 threads=2 precision=f32 out=""
  options "task kind steps warmup threads precision out" "" 0 "$@"
  local bench="$build_dir/hnas-bench"
  [ -x "$bench" ] || fail "$bench is missing; build the hnas-bench target first"
  out=${out:-$(mktemp -d /tmp/bench_regions.XXXXXX)}
  mkdir -p "$out"
  gcc -O2 -shared -fPIC -o "$out/openmp_regions.so" scripts/openmp_regions.c -ldl -lgomp -ldnnl \
    || fail "cannot build scripts/openmp_regions.c (needs gcc and libdnnl-dev)"
  # Runs of 2 and of 2 + --steps timed steps: their difference is --steps steps, without start-up and warm-up.
  for n in 2 $((steps + 2)); do
    OMP_NUM_THREADS=$threads HNAS_REGIONS_OUT="$out/regions-$n.json" LD_PRELOAD="$out/openmp_regions.so" \
      "$bench" train --task "$task" --kind "$kind" --threads "$threads" --steps "$n" --warmup "$warmup" \
      --precision "$precision" >"$out/run-$n.json"
  done
  "$python" scripts/summarize.py bench regions "$out/regions-2.json" "$out/regions-$((steps + 2)).json" "$steps"
}

case "$command" in
  train | real | decode | ddp | profile | regions | bf16 | twin | data) shift; "$command" "$@" ;;
  -h | --help) usage 0 ;;
  *) usage 2 >&2 ;;
esac
