"""hnas's WordPiece (src/data/wordpiece.h) against the real BERT tokenizers, Hugging Face tokenizers'
BertWordPieceTokenizer and transformers' BertTokenizer, on every line of the bundled Gigaword articles and of
data/corpus/sotu.txt (docs/bert_parity.md). Each differing line falls in a class: marker (Gigaword's `UNK` and
`<unk>`, which hnas reads as [UNK]: the peer must agree once they are written [UNK]), sigma (a word-final
capital sigma, lowered as hnas does: the peer must then agree) or other (printed in full).

    ~/.cache/hnas-peers/venv/bin/python scripts/wordpiece_agreement.py [--examples N]
"""

import argparse
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_parity as pc  # noqa: E402

FILES = [pc.GIGAWORD_TEST, pc.GIGAWORD_VALID] + [
    os.path.join(pc.ROOT, "data", "gigaword", folder, name) for folder, name in (
        ("valid_4k", "valid.article.filter.4K.txt"), ("valid_10k", "valid.article.filter.10K.txt"),
        ("valid_small", "valid.src.small.txt"))] + [pc.SOTU]
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
    totals = {name: dict.fromkeys(("lines", "differ", "marker", "sigma", "other"), 0) for name in peers}
    examples = {}
    for path in FILES:
        ids, pieces = hnas_tokens(vocab, path)
        lines = pc.read_lines(path)
        if len(ids) != len(lines):
            sys.exit(f"{path}: hnas tokenize gave {len(ids)} lines for {len(lines)}")
        counts = {}
        for name, peer in peers.items():
            found = dict.fromkeys(("differ", "marker", "sigma", "other"), 0)
            for number, (line, ours) in enumerate(zip(lines, ids), 1):
                theirs = peer(line)
                if theirs == ours:
                    continue
                marked = MARKER.sub("[UNK]", line)
                kind = ("marker" if MARKER.search(line) and peer(marked) == ours
                        else "sigma" if "Σ" in line and peer(marked.replace("Σ", "σ")) == ours else "other")
                found["differ"] += 1
                found[kind] += 1
                if len(examples.setdefault((name, kind), [])) < args.examples or kind == "other":
                    examples[name, kind].append((os.path.relpath(path, pc.ROOT), number, line, pieces[number - 1],
                                                 slow.convert_ids_to_tokens(theirs)))
            totals[name]["lines"] += len(lines)
            for key, value in found.items():
                totals[name][key] += value
            counts[name] = "{differ} differ (marker {marker}, sigma {sigma}, other {other})".format(**found)
        print(f"{os.path.relpath(path, pc.ROOT)}: {len(lines)} lines; " + "; ".join(f"{n}: {c}" for n, c in counts.items()))
    print("\n| peer | lines | lines that differ | marker | final sigma | other |\n|---|---|---|---|---|---|")
    for name, t in totals.items():
        print(f"| {name} | {t['lines']} | {t['differ']} | {t['marker']} | {t['sigma']} | {t['other']} |")
    for (name, kind), found in sorted(examples.items()):
        for path, number, line, ours, theirs in found:
            i = next((i for i, (a, b) in enumerate(zip(ours + [None], theirs + [None])) if a != b), 0)
            print(f"\n[{kind}] {name}, {path}:{number}: hnas {ours[max(0, i - 3):i + 4]} vs {theirs[max(0, i - 3):i + 4]}")
            if kind == "other":
                print(f"  line: {line[:300]}")


if __name__ == "__main__":
    main()
