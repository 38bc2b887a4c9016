"""Shared by the parity scripts (scripts/bert_parity.py, scripts/wordpiece_agreement.py,
scripts/export_parity.py): paths, the bundled real text, running build/hnas, and transformers'
hidden states on hnas's padded batches. Run with the python of scripts/setup_peers.sh's venv."""

import os
import re
import subprocess
import sys

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
HNAS = os.path.join(ROOT, "build", "hnas")
PEERS = os.environ.get("HNAS_PEERS", os.path.expanduser("~/.cache/hnas-peers"))
MINILM = os.path.join(PEERS, "minilm")  # scripts/setup_peers.sh links it to the package's model folder
GIGAWORD_TEST = os.path.join(ROOT, "data", "gigaword", "test_1951", "input.txt")
GIGAWORD_VALID = os.path.join(ROOT, "data", "gigaword", "valid_1k", "valid.article.filter.txt")
SOTU = os.path.join(ROOT, "data", "corpus", "sotu.txt")


def check_peers():
    if not os.path.exists(os.path.join(MINILM, "model.safetensors")):
        sys.exit(f"no MiniLM weights at {MINILM}: run scripts/setup_peers.sh")
    if not os.path.exists(HNAS):
        sys.exit(f"no {HNAS}: build hnas first (cmake --build build --target hnas)")


def run(args, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    return result.stdout


def read_lines(path, count=None):
    with open(path, encoding="utf-8", newline="\n") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines[:count] if count else lines


def sotu_sentences(count):
    """`count` sentences spread evenly over all of sotu.txt's addresses (1790-2021): the addresses split
    after . ! ? followed by a space and a capital or a quote, sentences of 5 to 60 words, every k-th."""
    sentences = []
    for address in read_lines(SOTU):
        for s in re.split(r'(?<=[.!?])\s+(?=["A-Z])', address):
            if 5 <= len(s.split()) <= 60 and not any(ord(c) < 32 and c != "\t" for c in s):
                sentences.append(s.strip())
    step = len(sentences) // count
    return [sentences[i * step] for i in range(count)]


def hnas_states(checkpoint, lines_path, out, batch=8, precision="f32"):
    """build/hnas hidden-states: {name: array}, hidden.K of real tokens only."""
    from safetensors.numpy import load_file
    run([HNAS, "hidden-states", "--checkpoint", checkpoint, "--input", lines_path, "--out", out, "--batch", str(batch),
         "--precision", precision])
    return load_file(out)


def transformers_states(model, states, batch=8):
    """The same padded batches through a transformers BertModel (float32, eval): the real tokens'
    hidden states per layer (list of (T, D)) and the mean-pooled last layer (N, D)."""
    import torch
    lengths = states["lengths"].astype(np.int64)
    ids = states["input_ids"].astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    hidden, pooled = None, []
    with torch.no_grad():
        for b0 in range(0, len(lengths), batch):
            rows = range(b0, min(len(lengths), b0 + batch))
            width = max(lengths[r] for r in rows)
            input_ids = torch.zeros((len(rows), width), dtype=torch.long)  # [PAD] is row 0 of BERT's vocab.txt
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            for i, r in enumerate(rows):
                input_ids[i, :lengths[r]] = torch.from_numpy(ids[starts[r]:starts[r + 1]])
                mask[i, :lengths[r]] = 1
            out = model(input_ids=input_ids, attention_mask=mask, token_type_ids=torch.zeros_like(input_ids),
                        output_hidden_states=True)
            if hidden is None:
                hidden = [[] for _ in out.hidden_states]
            for k, h in enumerate(out.hidden_states):
                for i, r in enumerate(rows):
                    hidden[k].append(h[i, :lengths[r]].numpy())
            last = out.hidden_states[-1]
            for i, r in enumerate(rows):
                pooled.append(last[i, :lengths[r]].double().mean(0).float().numpy())
    return [np.concatenate(h) for h in hidden], np.stack(pooled)


def difference(ours, theirs):
    """max |a - b| and the relative figure max |a - b| / max |b| (over the whole tensor)."""
    ours, theirs = ours.astype(np.float64), theirs.astype(np.float64)
    largest = float(np.abs(ours - theirs).max())
    return largest, largest / float(np.abs(theirs).max())
