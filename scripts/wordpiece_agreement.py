"""hnas's WordPiece (src/data/wordpiece.h) against the real BERT tokenizers: on every
line of the bundled Gigaword test and validation articles and of data/corpus/sotu.txt, hnas's pieces and
ids (`hnas tokenize`, the uncased vocab.txt of all-MiniLM-L6-v2, which is bert-base-uncased's) beside
Hugging Face tokenizers' BertWordPieceTokenizer (lowercase, the same vocab.txt; Rust) and transformers'
BertTokenizer (do_lower_case; Python, Google's tokenization.py). Counts the lines that differ and sorts
every differing line into a class:

  marker   Gigaword's rare-word markers: hnas reads a whitespace-delimited `UNK` or `<unk>` as one [UNK]
           (src/data/tokenizer.h), BERT's tokenizers as the text it is (`un ##k`, `< un ##k >`). Checked
           by giving the peers the line with each marker written [UNK] (their special token): it must
           then agree.
  sigma    a word-final capital sigma: Python's str.lower() gives final ς (U+03C2) there, hnas the
           per-character lowercase σ (U+03C3) (checked likewise, with Σ lowered as hnas does).
  other    anything else (printed in full).

    ~/.cache/hnas-peers/venv/bin/python scripts/wordpiece_agreement.py [--examples N]
"""

import argparse
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_parity as pc  # noqa: E402

FILES = [pc.GIGAWORD_TEST,
         os.path.join(pc.ROOT, "data", "gigaword", "valid_1k", "valid.article.filter.txt"),
         os.path.join(pc.ROOT, "data", "gigaword", "valid_4k", "valid.article.filter.4K.txt"),
         os.path.join(pc.ROOT, "data", "gigaword", "valid_10k", "valid.article.filter.10K.txt"),
         os.path.join(pc.ROOT, "data", "gigaword", "valid_small", "valid.src.small.txt"),
         pc.SOTU]
MARKER = re.compile(r"(?<!\S)(?:UNK|<unk>)(?!\S)")


def hnas_tokens(vocab, path):
    ids = [[int(x) for x in line.split()] for line in pc.run([pc.HNAS, "tokenize", "--vocab", vocab, "--input", path]).split("\n")[:-1]]
    pieces = [line.split(" ") if line else [] for line in pc.run([pc.HNAS, "tokenize", "--vocab", vocab, "--input", path, "--pieces"]).split("\n")[:-1]]
    return ids, pieces


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=2, help="examples printed per class")
    args = parser.parse_args()
    pc.check_peers()
    import tokenizers
    import transformers
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizer
    vocab = os.path.join(pc.MINILM, "vocab.txt")
    fast = BertWordPieceTokenizer(vocab, lowercase=True)
    slow = BertTokenizer(vocab, do_lower_case=True)
    peers = {"tokenizers BertWordPieceTokenizer": lambda text: fast.encode(text, add_special_tokens=False).ids,
             "transformers BertTokenizer": lambda text: slow.convert_tokens_to_ids(slow.tokenize(text))}
    print(f"vocab {os.path.realpath(vocab)}; tokenizers {tokenizers.__version__}, transformers {transformers.__version__}")
    totals = {name: {"lines": 0, "differ": 0, "marker": 0, "sigma": 0, "other": 0} for name in peers}
    examples = {}
    for path in FILES:
        ids, pieces = hnas_tokens(vocab, path)
        lines = pc.read_lines(path)
        if len(ids) != len(lines):
            sys.exit(f"{path}: hnas tokenize gave {len(ids)} lines for {len(lines)}")
        counts = {}
        for name, peer in peers.items():
            differ = marker = sigma = other = 0
            for number, (line, ours) in enumerate(zip(lines, ids), 1):
                theirs = peer(line)
                if theirs == ours:
                    continue
                differ += 1
                if MARKER.search(line) and peer(MARKER.sub("[UNK]", line)) == ours:
                    kind = "marker"
                    marker += 1
                elif "Σ" in line and peer(MARKER.sub("[UNK]", line).replace("Σ", "σ")) == ours:
                    kind = "sigma"
                    sigma += 1
                else:
                    kind = "other"
                    other += 1
                key = (name, kind)
                if len(examples.setdefault(key, [])) < args.examples or kind == "other":
                    examples[key].append((os.path.relpath(path, pc.ROOT), number, line, pieces[number - 1],
                                          slow.convert_ids_to_tokens(theirs)))
            t = totals[name]
            t["lines"] += len(lines)
            t["differ"] += differ
            t["marker"] += marker
            t["sigma"] += sigma
            t["other"] += other
            counts[name] = f"{differ} differ (marker {marker}, sigma {sigma}, other {other})"
        print(f"{os.path.relpath(path, pc.ROOT)}: {len(lines)} lines; " + "; ".join(f"{n}: {c}" for n, c in counts.items()))
    print("\n| peer | lines | lines that differ | marker | final sigma | other |\n|---|---|---|---|---|---|")
    for name, t in totals.items():
        print(f"| {name} | {t['lines']} | {t['differ']} | {t['marker']} | {t['sigma']} | {t['other']} |")
    for (name, kind), found in sorted(examples.items()):
        for path, number, line, ours, theirs in found:
            where = [i for i, (a, b) in enumerate(zip(ours + [None], theirs + [None])) if a != b][:1] or [0]
            i = where[0]
            print(f"\n[{kind}] {name}, {path}:{number}: hnas {ours[max(0, i - 3):i + 4]} vs {theirs[max(0, i - 3):i + 4]}")
            if kind == "other":
                print(f"  line: {line[:300]}")


if __name__ == "__main__":
    main()
