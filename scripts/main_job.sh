#!/usr/bin/env bash
# The main job on the bundled data: set-up, build, then a short demonstration training run.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
build/hnas --version
build/hnas demo --steps 200
