#!/usr/bin/env bash
# The test command: the size gates, set-up, a warnings-as-errors build and the whole CTest suite, then
# the same suite once more built with AddressSanitizer + UndefinedBehaviorSanitizer (in build-asan/).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/check_sizes.sh

HNAS_CMAKE_ARGS="-DHNAS_WERROR=ON" scripts/setup.sh
# One test per core at a time: the timing-dependent tests (rank timeouts, kill -9) allow for that load.
ctest --test-dir build --output-on-failure --timeout 900 -j "$(nproc)"

echo "== the suite again under AddressSanitizer + UndefinedBehaviorSanitizer =="
HNAS_BUILD_DIR=build-asan HNAS_BUILD_TYPE=RelWithDebInfo HNAS_CMAKE_ARGS="-DHNAS_WERROR=ON -DHNAS_SANITIZE=ON -DHNAS_BUILD_BENCH=OFF" \
  scripts/setup.sh
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure --timeout 1800 -j "$(nproc)"
