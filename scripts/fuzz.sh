#!/usr/bin/env bash
# Fuzzes hnas's readers of untrusted input with libFuzzer (docs/testing.md, "Fuzzing": the targets, what a
# finding is): builds the targets in build-fuzz/ with clang and the sanitizers, then runs each for SECONDS,
# one per core at a time, from a copy of its committed seed corpus (tests/fuzz/corpus/<target>/).
#
#   scripts/fuzz.sh SECONDS [TARGET ...]      # TARGET: fuzz_config, fuzz_checkpoint, fuzz_gigaword, fuzz_mlm,
#                                             # fuzz_finetune_data, fuzz_safetensors_structure, fuzz_checkpoint_structure,
#                                             # fuzz_prepared_text
#
# Exits 1 if any target found something, printing its report and the input that did it (kept in
# build-fuzz/fuzz-runs/artifacts/<target>/; reproduce with build-fuzz/tests/fuzz/<target> FILE).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 1 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz.sh SECONDS [TARGET ...]" >&2
  exit 2
fi
seconds=$1
shift
targets=("$@")
if ((${#targets[@]} == 0)); then
  targets=(fuzz_config fuzz_checkpoint fuzz_gigaword fuzz_mlm fuzz_finetune_data fuzz_safetensors_structure fuzz_checkpoint_structure
           fuzz_prepared_text)
fi

# Debian 12's clang 14, its libFuzzer and sanitizer runtimes (libclang-rt-14-dev) and its OpenMP
# runtime (libomp-14-dev); scripts/setup.sh installs the rest.
missing=()
for package in clang libclang-rt-14-dev libomp-14-dev; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "fuzz: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "fuzz: these Debian packages are missing and installing them needs root: ${missing[*]}" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debug: assertions stay on; tests/fuzz/CMakeLists.txt compiles at -O1.
HNAS_BUILD_DIR=build-fuzz HNAS_BUILD_TYPE=Debug HNAS_CMAKE_ARGS="-DCMAKE_CXX_COMPILER=clang++ -DHNAS_FUZZ=ON" \
  scripts/setup.sh

runs=$PWD/build-fuzz/fuzz-runs
rm -rf "$runs"
mkdir -p "$runs/corpus" "$runs/artifacts" "$runs/logs"
# The files the targets write for the readers (one set per input) go to memory when it can: on ext4,
# truncating and rewriting a file thousands of times a second costs more than the parsing.
scratch=$(mktemp -d -p /dev/shm hnas-fuzz.XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# Longest input per target: above its largest seed (the checkpoint seeds are 9 and 33 KB), small
# enough to keep executions fast.
max_len_of() {
  case $1 in
    fuzz_checkpoint) echo 40000 ;;
    fuzz_finetune_data | fuzz_config) echo 8192 ;;
    *) echo 4096 ;;
  esac
}

# fuzz_one TARGET: one libFuzzer run; its exit status goes to logs/TARGET.status.
fuzz_one() {
  local target=$1 status=0 dict=()
  cp -r "tests/fuzz/corpus/$target" "$runs/corpus/$target"
  mkdir -p "$runs/artifacts/$target"
  if [ -f "tests/fuzz/$target.dict" ]; then dict=(-dict="tests/fuzz/$target.dict"); fi
  # One OpenMP thread: the inputs are tiny, and the fuzzer measures one input at a time.
  TMPDIR=$scratch OMP_NUM_THREADS=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "build-fuzz/tests/fuzz/$target" -max_total_time="$seconds" -max_len="$(max_len_of "$target")" -timeout=20 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$runs/artifacts/$target/" "${dict[@]}" \
    "$runs/corpus/$target" >"$runs/logs/$target.log" 2>&1 || status=$?
  echo "$status" >"$runs/logs/$target.status"
}

# Each fuzzer runs on one core, so the targets run one per core at a time.
cores=$(nproc)
for target in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= cores)); do wait -n || true; done
  fuzz_one "$target" &
done
wait

found=0
total=0
printf '%-16s %8s %12s %8s  %s\n' target seconds executions exec/s result
for target in "${targets[@]}"; do
  log=$runs/logs/$target.log
  status=$(cat "$runs/logs/$target.status")
  executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  artifacts=$(find "$runs/artifacts/$target" -type f)
  result="nothing found"
  if ! { [ "$status" -eq 0 ] && [ -z "$artifacts" ]; }; then result="FOUND (exit status $status)" found=1; fi
  total=$((total + ${executions:-0}))
  printf '%-16s %8s %12s %8s  %s\n' "$target" "$seconds" "${executions:--}" "${rate:--}" "$result"
  if [ "$result" != "nothing found" ]; then
    echo "---- $target: the end of its log ($log) ----"
    grep -v -e '^#[0-9]' -e '^INFO:' "$log" | tail -n 60 || true
    echo "---- $target: the input that did it (reproduce: build-fuzz/tests/fuzz/$target FILE) ----"
    echo "${artifacts:-(none written; see the log)}"
  fi
done
echo "total executions: $total"
exit "$found"
