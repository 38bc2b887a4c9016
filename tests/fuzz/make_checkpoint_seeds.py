#!/usr/bin/env python3
"""Writes the seed corpus of tests/fuzz/fuzz_checkpoint.cpp: real checkpoints of 2-step runs of a
4-wide headline model and a 4-wide masked-LM model, trained by the hnas executable given.

Every checkpoint holds its SentencePiece model (about 240 KB, mostly the normalizer's character map,
whatever the vocabulary size), which would make each fuzzing input that large; the seeds drop that
entry and rewrite the layout and checksums as src/io/checkpoint.h documents (CRC-32C and the header's
reader from the PyTorch twin, scripts/twin/checkpoint.py, with the standard library alone). They keep everything
else: the metadata with the resolved config, RNG states and data position, the parameters and the
optimizer moments (the masked-LM seed keeps the parameters alone, as a decoding checkpoint).

usage: tests/fuzz/make_checkpoint_seeds.py build/hnas tests/fuzz/corpus/fuzz_checkpoint
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from twin.checkpoint import MAGIC, VERSION, align64, crc32c, read_header  # noqa: E402  (the PyTorch twin's reader)
TITLES = "data/gigaword/valid_small/valid.trg.small.txt"
ARTICLES = "data/gigaword/valid_small/valid.src.small.txt"
TINY = ["model.d_model=4", "model.heads=1", "model.ffn_dim=4", "model.encoder_layers=1", "tokenizer.vocab_size=100",
        "train.steps=2", "checkpoint.every=2", "validation.every=0", "validation.max_batches=1"]
HEADLINE = TINY + ["model.decoder_layers=1", "model.max_source_positions=16", "model.max_target_positions=8",
                   "data.max_source=16", "data.max_target=8", f"data.train_articles={ARTICLES}",
                   f"data.train_titles={TITLES}", f"data.valid_articles={ARTICLES}", f"data.valid_titles={TITLES}",
                   "validation.decode_examples=0", "validation.metric=loss"]
MLM = TINY + ["model.max_positions=16", "data.max_seq=16",
              'data.train_sources=[{"path": "%s", "unit": "line"}]' % TITLES]


def rewrite(path, keep):
    """The checkpoint at `path` holding only the entries for which keep(name) is true."""
    with open(path, "rb") as f:
        data = f.read()
    header, data_start = read_header(data, path)
    entries, blobs, end = [], [], 0
    for entry in header["entries"]:
        if not keep(entry["name"]):
            continue
        blob = data[data_start + entry["offset"]:data_start + entry["offset"] + entry["length"]]
        entry["offset"] = align64(end)
        entries.append(entry)
        blobs.append(b"\0" * (entry["offset"] - end) + blob)
        end = entry["offset"] + entry["length"]
    header["entries"] = entries
    text = json.dumps(header, separators=(",", ":")).encode()
    preamble = MAGIC + struct.pack("<IIQI", VERSION, len(text), end, crc32c(text))
    preamble += struct.pack("<I", crc32c(preamble))
    padding = b"\0" * (align64(32 + len(text)) - 32 - len(text))
    return preamble + text + padding + b"".join(blobs)


def train(hnas, out, config, overrides):
    command = [hnas, "train", "--config", config, "--out", out]
    for override in overrides:
        command += ["--set", override]
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return os.path.join(out, "checkpoints", "step-00000002.ckpt")


def main():
    hnas, corpus = os.path.abspath(sys.argv[1]), sys.argv[2]
    os.makedirs(corpus, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        headline = train(hnas, os.path.join(scratch, "headline"), "configs/gigaword_tiny.json",
                         HEADLINE + ["model.attention.encoder.kind=lnas"])
        mlm = train(hnas, os.path.join(scratch, "mlm"), "configs/mlm_tiny.json", MLM)
        seeds = {
            "headline_step2.ckpt": rewrite(headline, lambda name: name != "tokenizer.model"),
            "mlm_parameters.ckpt": rewrite(mlm, lambda name: name != "tokenizer.model" and "/" not in name),
        }
    for name, content in seeds.items():
        with open(os.path.join(corpus, name), "wb") as out:
            out.write(content)
        print(f"{name}: {len(content)} bytes")


if __name__ == "__main__":
    main()
