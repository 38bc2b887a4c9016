# Sourced by the benchmark scripts that run hnas beside PyTorch twins (bench_train.sh, bench_real.sh, bench_decode.sh).

# require_torch NAME: $python (Debian's python3 with python3-torch) must import torch on OpenBLAS
# (Debian's libopenblas0-openmp; without it torch falls back to the reference BLAS and is about 26x
# slower); the BLAS is installed when running as root.
require_torch() {
  local name=$1
  if ! dpkg-query -W -f='${Status}' libopenblas0-openmp 2>/dev/null | grep -q "install ok installed"; then
    if [ "$(id -u)" -ne 0 ]; then
      echo "$name: libopenblas0-openmp is missing (torch would use the reference BLAS); install it as root" >&2
      exit 1
    fi
    echo "$name: installing libopenblas0-openmp" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libopenblas0-openmp >/dev/null
  fi
  "$python" -c "import torch" 2>/dev/null || {
    echo "$name: $python cannot import torch; install Debian's python3-torch" >&2; exit 1; }
}

# build_targets BUILD_DIR TARGET...: a Release build of the targets; builds on shared machines take
# turns through /tmp/build.lock when flock exists.
build_targets() {
  local build_dir=$1; shift
  if [ ! -f "$build_dir/CMakeCache.txt" ]; then cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >/dev/null; fi
  local targets=()
  for target in "$@"; do targets+=(--target "$target"); done
  if command -v flock >/dev/null; then
    flock /tmp/build.lock nice cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}" >/dev/null
  else
    cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}" >/dev/null
  fi
}

# copy_binaries NAME BUILD_DIR OUT BINARY...: the built binaries, which must exist, copied to OUT/bin;
# the runs use the copies, so a rebuild during the benchmark changes nothing.
copy_binaries() {
  local name=$1 build_dir=$2 out=$3; shift 3
  mkdir -p "$out/bin"
  for binary in "$@"; do
    [ -x "$build_dir/$binary" ] || { echo "$name: $build_dir/$binary is missing (build it or drop --no-build)" >&2; exit 1; }
    cp "$build_dir/$binary" "$out/bin/"
  done
}
