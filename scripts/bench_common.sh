# Sourced by the benchmark scripts that run hnas beside PyTorch twins (bench_train.sh, bench_real.sh, bench_decode.sh).

# require_torch NAME: $python (Debian's python3 with python3-torch) must import torch on OpenBLAS
# (Debian's libopenblas0-openmp; without it torch falls back to the reference BLAS and is about 26x
# slower); both packages are installed when missing and running as root.
require_torch() {
  local name=$1 package missing=()
  for package in python3-torch libopenblas0-openmp; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  if ((${#missing[@]})); then
    if [ "$(id -u)" -ne 0 ]; then
      echo "$name: ${missing[*]} missing (Debian's PyTorch on OpenBLAS); install as root" >&2
      exit 1
    fi
    echo "$name: installing ${missing[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  "$python" -c "import torch" 2>/dev/null || {
    echo "$name: $python cannot import torch; it needs Debian's python3-torch (or set PYTHON)" >&2; exit 1; }
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

# select_peers NAME: checks $peers (words of "torch113 eager compile ipex") and keeps those that can run here.
# torch113, Debian's PyTorch 1.13, runs in $python and must have torch on OpenBLAS (require_torch, which stops
# the script otherwise). From scripts/setup_peers.sh's environments under $HNAS_PEERS (default
# ~/.cache/hnas-peers): eager and torch.compile run in $torch_python (PEERS_TORCH_PYTHON, default
# torch-latest/bin/python), IPEX in $ipex_python (PEERS_IPEX_PYTHON, default torch-ipex/bin/python); each is
# skipped, saying why, when its python, its PyTorch 2 or intel_extension_for_pytorch is missing.
# Sets peers (the ones kept, in the order given), torch_python, ipex_python and skipped ("peer: why" each,
# also printed).
select_peers() {
  local name=$1 peer why
  for peer in $peers; do
    [[ "$peer" =~ ^(torch113|eager|compile|ipex)$ ]] || { echo "$name: unknown peer $peer (torch113, eager, compile, ipex)" >&2; exit 2; }
  done
  local root=${HNAS_PEERS:-$HOME/.cache/hnas-peers}
  torch_python=${PEERS_TORCH_PYTHON:-$root/torch-latest/bin/python}
  ipex_python=${PEERS_IPEX_PYTHON:-$root/torch-ipex/bin/python}
  skipped=()
  local kept=()
  for peer in $peers; do
    why=""
    case "$peer" in
      torch113) require_torch "$name" ;;
      eager|compile) why=$(peer_missing "$torch_python" torch) ;;
      ipex) why=$(peer_missing "$ipex_python" intel_extension_for_pytorch) ;;
    esac
    if [ -n "$why" ]; then skipped+=("$peer: $why"); else kept+=("$peer"); fi
  done
  for why in ${skipped[@]+"${skipped[@]}"}; do echo "$name: skipping $why" >&2; done
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

# peer_command PEER PRECISION SCRIPT: sets cmd to the start of one peer's command line, SCRIPT (a twin taking
# --peer and --precision: scripts/torch_peers.py) in its python (select_peers); PyTorch 1.13 always eager and in f32.
peer_command() {
  if [[ "$1" == torch113 ]]; then
    cmd=("$python" "$3" --peer eager --precision f32)
  else
    local peer_python=$torch_python
    [[ "$1" != ipex ]] || peer_python=$ipex_python
    cmd=("$peer_python" "$3" --peer "$1" --precision "$2")
  fi
}
