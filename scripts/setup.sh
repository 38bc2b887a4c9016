#!/usr/bin/env bash
# Installs hnas's build dependencies from Debian's packages (idempotent; needs root on a fresh
# machine) and builds into build/. Environment:
#   HNAS_BUILD_DIR  build folder (default build)
#   HNAS_CMAKE_ARGS extra CMake arguments, e.g. "-DHNAS_WERROR=ON" or "-DHNAS_SANITIZE=ON"; with
#                   "-DHNAS_BUILD_TESTS=OFF -DHNAS_BUILD_BENCH=OFF" only the hnas executable is configured
#   HNAS_BUILD_TYPE CMake build type (default Release)
#   HNAS_BUILD_TARGET build only this CMake target, e.g. hnas (default: all targets)
set -euo pipefail
cd "$(dirname "$0")/.."

# ocl-icd-opencl-dev: Debian's libdnnl-dev only recommends it, but oneDNN's CMake package config
# (dnnl-config.cmake) calls find_package(OpenCL) unconditionally, so without it CMake cannot find oneDNN.
packages=(build-essential cmake git pkg-config python3 libdnnl-dev ocl-icd-opencl-dev libsentencepiece-dev
          nlohmann-json3-dev libspdlog-dev libcli11-dev libgtest-dev libopenmpi-dev openmpi-bin zlib1g-dev)
# Under CI the report test renders hnas report's page in a real browser (tests/experiments/test_report.cpp).
if [ -n "${CI:-}" ]; then packages+=(chromium); fi
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: these Debian packages are missing and installing them needs root: ${missing[*]}" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Derived training files (deduplicated Gigaword pieces) are generated, not committed.
python3 data/gigaword/prepare_data.py --if-missing -q

build_dir=${HNAS_BUILD_DIR:-build}
# shellcheck disable=SC2086 # HNAS_CMAKE_ARGS is a list of arguments
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=${HNAS_BUILD_TYPE:-Release} ${HNAS_CMAKE_ARGS:-} >/dev/null
target_args=()
if [ -n "${HNAS_BUILD_TARGET:-}" ]; then target_args=(--target "$HNAS_BUILD_TARGET"); fi
cmake --build "$build_dir" -j "$(nproc)" "${target_args[@]}"
