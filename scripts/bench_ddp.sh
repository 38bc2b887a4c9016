#!/usr/bin/env bash
# Data-parallel training over a slow link (docs/performance.md), side by side in one run. Each round runs
# 2 ranks of `hnas train` (mpirun over TCP, one OpenMP thread per rank, one core each) in network
# namespaces of their own, so no traffic but theirs is touched: once over their link as it is, and once
# with the link slowed to --rate (default 1gbit) and, when the kernel has sch_netem, --delay (default
# 0.5ms). Without sch_netem the link is only rate-limited (tbf) and the script says so. Two links:
#   pair:     two namespaces joined by a veth pair, one rank in each (mpirun launches the second rank
#             into the other namespace), each end slowed: a full-duplex link, --rate each way, as
#             between two machines. The default.
#   loopback: both ranks in one namespace over its loopback, slowed at its one queue: both directions
#             share --rate.
# Configs:
#   tiny:     configs/gigaword_tiny.json
#   gigaword: configs/gigaword.json with data.batch_sentences=64 (the reference workload of bench_real.sh)
# Step time: metrics.jsonl's elapsed_seconds between the log at step --skip and the last step (the
# first steps create primitives and warm the pool). It also prints the seconds per step the trainer
# spent after its backward pass until every rank had the gradient sums (gradient_wait_seconds_per_step),
# the communication the backward pass did not hide.
# Options:
#   --configs "A B"    subset of "tiny gigaword" (default both)
#   --link L           pair (default) or loopback
#   --steps N          steps per run (default 60); --skip N: steps left out of the timing (default 20)
#   --rounds N         alternating rounds (default 2)
#   --rate R --delay D tc's units (default 1gbit, 0.5ms)
#   --baseline BIN     also run this hnas binary (e.g. a copy of build/hnas made before a change)
#   --bf16-sums        also run each binary with train.bf16_gradient_sums=true (rows "hnasbf16",
#                      "hnas_baselinebf16")
#   --out DIR          where runs go (default a fresh temporary directory)
#   --no-build         use build/hnas as it is
# Needs root (network namespaces and tc), Open MPI's mpirun, iproute2 and taskset.
# Environment: HNAS_BUILD_DIR (default build), PYTHON (default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."

configs="tiny gigaword" link_kind=pair steps=60 skip=20 rounds=2 rate=1gbit delay=0.5ms baseline="" out="" build=1 bf16_sums=0
while (($#)); do
  case "$1" in
    --configs) configs=${2:?--configs needs a value}; shift ;;
    --link) link_kind=${2:?--link needs a value}; shift ;;
    --steps) steps=${2:?--steps needs a value}; shift ;;
    --skip) skip=${2:?--skip needs a value}; shift ;;
    --rounds) rounds=${2:?--rounds needs a value}; shift ;;
    --rate) rate=${2:?--rate needs a value}; shift ;;
    --delay) delay=${2:?--delay needs a value}; shift ;;
    --baseline) baseline=${2:?--baseline needs a value}; shift ;;
    --out) out=${2:?--out needs a value}; shift ;;
    --no-build) build=0 ;;
    --bf16-sums) bf16_sums=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "bench_ddp: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
for value in "$steps" "$skip" "$rounds"; do
  [[ "$value" =~ ^[1-9][0-9]*$ ]] || { echo "bench_ddp: '$value' is not a positive integer" >&2; exit 2; }
done
((skip < steps)) || { echo "bench_ddp: --skip $skip must be below --steps $steps" >&2; exit 2; }
[[ "$rate" =~ ^[0-9.]+(bit|kbit|mbit|gbit)$ ]] || { echo "bench_ddp: --rate $rate is not a rate like 1gbit or 100mbit" >&2; exit 2; }
[[ "$delay" =~ ^[0-9.]+(us|ms|s)$ ]] || { echo "bench_ddp: --delay $delay is not a time like 0.5ms" >&2; exit 2; }
[[ "$link_kind" == pair || "$link_kind" == loopback ]] || { echo "bench_ddp: --link $link_kind is not pair or loopback" >&2; exit 2; }
for config in $configs; do
  [[ "$config" == tiny || "$config" == gigaword ]] || { echo "bench_ddp: unknown config $config (tiny, gigaword)" >&2; exit 2; }
done
[ -z "$baseline" ] || [ -x "$baseline" ] || { echo "bench_ddp: --baseline $baseline is not an executable" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "bench_ddp: needs root for network namespaces and tc" >&2; exit 1; }
for tool in mpirun unshare ip tc taskset; do
  command -v "$tool" >/dev/null || { echo "bench_ddp: $tool is missing (openmpi-bin, util-linux, iproute2)" >&2; exit 1; }
done
(($(nproc) >= 2)) || { echo "bench_ddp: needs 2 cores, one per rank; this machine gives $(nproc)" >&2; exit 1; }
unshare -n true 2>/dev/null || { echo "bench_ddp: cannot create a network namespace here (unshare -n failed)" >&2; exit 1; }

python=${PYTHON:-/usr/bin/python3}
source scripts/bench_common.sh
build_dir=${HNAS_BUILD_DIR:-build}
if ((build)); then build_targets "$build_dir" hnas; fi
out=${out:-$(mktemp -d /tmp/bench_ddp.XXXXXX)}
copy_binaries bench_ddp "$build_dir" "$out" hnas
[ -z "$baseline" ] || cp "$baseline" "$out/bin/hnas_baseline"
results="$out/results.jsonl"
: >"$results"

# The slow link: netem gives rate and delay; a kernel without sch_netem gets tbf's rate alone.
if unshare -n sh -c "ip link set lo up && tc qdisc add dev lo root netem delay $delay rate $rate" 2>/dev/null; then
  slow_qdisc="netem delay $delay rate $rate" slow_link="$rate, $delay"
else
  slow_qdisc="tbf rate $rate burst 256kb latency 20ms" slow_link="$rate, no added delay"
  echo "bench_ddp: this kernel has no sch_netem: the slow link is limited to $rate (tbf) without the $delay delay" >&2
fi
echo "bench_ddp: 2 ranks, 1 thread each, $steps steps (timed from step $skip), $rounds rounds; $link_kind link, slowed to" \
  "$slow_link; output in $out" >&2

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

# set_link SPEED: the link as it is (fast) or slowed (slow), on every queue the ranks' traffic passes.
set_link() {
  [ "$link_kind" = pair ] || return 0
  for end in a b; do
    tc -n "$pair$end" qdisc del dev "$pair$end" root 2>/dev/null || true
    [ "$1" = fast ] || tc -n "$pair$end" qdisc add dev "$pair$end" root $slow_qdisc
  done
}

# ddp_run NAME BINARY LINK CONFIG SETTINGS...: one 2-rank run (LINK: fast or slow), appended to results
# as a JSON line.
ddp_run() {
  local name=$1 binary=$2 link=$3 config=$4; shift 4
  rm -rf "${out:?}/$name"
  local train=("$binary" train --config "$config" --out "$out/$name" --set "$@")
  if [ "$link_kind" = pair ]; then
    set_link "$link"
    ip netns exec "${pair}a" taskset -c 0 mpirun -np 2 --host "$address_a:1,$address_b:1" --bind-to none \
      --mca plm_rsh_agent "$out/launch_in_b" --mca btl self,tcp --mca btl_tcp_if_include "$subnet" \
      --mca oob_tcp_if_include "$subnet" "${train[@]}" >"$out/$name.log" 2>&1 \
      || { echo "bench_ddp: $name failed; see $out/$name.log" >&2; exit 1; }
  else
    local qdisc=""
    [ "$link" = slow ] && qdisc="tc qdisc add dev lo root $slow_qdisc &&"
    unshare -n sh -c "ip link set lo up && $qdisc exec mpirun -np 2 --bind-to core --mca btl self,tcp \
        --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \"\$@\"" sh "${train[@]}" >"$out/$name.log" 2>&1 \
      || { echo "bench_ddp: $name failed; see $out/$name.log" >&2; exit 1; }
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

for config in $configs; do
  case "$config" in
    tiny) file=configs/gigaword_tiny.json vocab=4000 settings=() ;;
    gigaword) file=configs/gigaword.json vocab=8000 settings=(data.batch_sentences=64) ;;
  esac
  "$out/bin/hnas" vocab --input data/gigaword/derived/train_all.article.txt data/gigaword/derived/train_all.title.txt \
    --model-prefix "$out/$config-tokenizer" --vocab-size "$vocab" >"$out/$config-tokenizer.log" 2>&1 \
    || { echo "bench_ddp: training the $config tokenizer failed; see $out/$config-tokenizer.log" >&2; exit 1; }
  settings+=(tokenizer.model="$out/$config-tokenizer.model" train.steps="$steps" train.log_every="$skip"
             validation.every=0 validation.max_batches=1 validation.decode_examples=0 validation.metric=loss)
  # Variants: a binary's name, with "bf16" appended when it sums in bf16.
  variants=(hnas); [ -z "$baseline" ] || variants+=(hnas_baseline)
  if ((bf16_sums)); then for variant in "${variants[@]}"; do variants+=("${variant}bf16"); done; fi
  for ((round = 1; round <= rounds; ++round)); do
    for variant in "${variants[@]}"; do
      extra=(); binary=$variant
      [[ "$variant" == *bf16 ]] && extra=(train.bf16_gradient_sums=true) binary=${variant%bf16}
      for link in fast slow; do
        echo "bench_ddp: $config round $round: $variant, $link link" >&2
        ddp_run "$config-$variant-$link-$round" "$out/bin/$binary" "$link" "$file" "${settings[@]}" "${extra[@]}"
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
