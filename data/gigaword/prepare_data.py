#!/usr/bin/env python3
"""Derive the deduplicated Gigaword training files of hnas.

Reads (never modifies) the bundled pieces under data/gigaword/ and writes

    data/gigaword/derived/train_extra.article.txt   extra training pairs made
    data/gigaword/derived/train_extra.title.txt     from the validation pieces
    data/gigaword/derived/train_all.article.txt     train_10k followed by
    data/gigaword/derived/train_all.title.txt       train_extra
    data/gigaword/derived/MANIFEST.json             counts, md5 sums, rules

Rules (see data/gigaword/README.md):

* One pass over the training sources in this fixed order:
  train_10k, valid_10k, valid_4k, valid_small.  Pairs are kept in input order.
* Articles are compared after stripping trailing ASCII whitespace
  (" \\t\\r\\n\\v\\f"); in the test set the rare-word mark `UNK` is read as
  `<unk>` for the comparison (the other files spell it `<unk>`).
* A pair is dropped when its article occurs in the test set
  (test_1951/input.txt) - reason "test"; else when it occurs in valid_1k (kept
  for validation) - reason "valid"; else when the same article was already
  kept earlier in the pass - reason "duplicate" (first occurrence wins).
* train_all = every kept pair; train_extra = the kept pairs that come from the
  validation pieces.  So train_all == train_10k (deduplicated) ++ train_extra.
* Output lines are the original lines (only the line terminator is
  normalised to LF), UTF-8, every line ends with "\\n".

The output depends only on the input files, so running the script again gives
byte-identical files (it rewrites nothing when they are already up to date).
Python 3 standard library only.

Usage:
    python3 data/gigaword/prepare_data.py             # (re)generate, print counts
    python3 data/gigaword/prepare_data.py --if-missing  # only when an output is missing
    python3 data/gigaword/prepare_data.py --check     # exit 1 if outputs are stale
"""

import argparse
import collections
import hashlib
import json
import os
import sys

STRIP_CHARS = " \t\r\n\v\f"

# (name, article file, title file), relative to data/gigaword/
TEST = ("test_1951", "test_1951/input.txt", "test_1951/task1_ref0.txt")
VALID = ("valid_1k", "valid_1k/valid.article.filter.txt",
         "valid_1k/valid.title.filter.txt")
TRAIN = ("train_10k", "train_10k/train.article.txt",
         "train_10k/train.title.txt")
EXTRA = [
    ("valid_10k", "valid_10k/valid.article.filter.10K.txt",
     "valid_10k/valid.title.filter.10K.txt"),
    ("valid_4k", "valid_4k/valid.article.filter.4K.txt",
     "valid_4k/valid.title.filter.4K.txt"),
    ("valid_small", "valid_small/valid.src.small.txt",
     "valid_small/valid.trg.small.txt"),
]

OUT_DIR = "derived"
OUTPUTS = [
    "train_extra.article.txt", "train_extra.title.txt",
    "train_all.article.txt", "train_all.title.txt",
]
MANIFEST = "MANIFEST.json"


class DataError(Exception):
    pass


def md5_hex(data):
    try:
        h = hashlib.md5(usedforsecurity=False)
    except TypeError:  # Python < 3.9
        h = hashlib.md5()
    h.update(data)
    return h.hexdigest()


def read_lines(path):
    """Return (lines without terminators, raw bytes) of a UTF-8 text file."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise DataError("cannot read {}: {}".format(path, e))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError("{} is not valid UTF-8: {}".format(path, e))
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [l[:-1] if l.endswith("\r") else l for l in lines]
    return lines, raw


def key(article, is_test=False):
    k = article.rstrip(STRIP_CHARS)
    if is_test:
        k = " ".join("<unk>" if t == "UNK" else t for t in k.split(" "))
    return k


def load_piece(giga, piece, inputs):
    name, art_rel, tit_rel = piece
    art_path = os.path.join(giga, art_rel)
    tit_path = os.path.join(giga, tit_rel)
    arts, art_raw = read_lines(art_path)
    tits, tit_raw = read_lines(tit_path)
    if len(arts) != len(tits):
        raise DataError(
            "piece {}: line counts differ: {} has {} lines but {} has {} "
            "lines".format(name, art_path, len(arts), tit_path, len(tits)))
    for rel, lines, raw in ((art_rel, arts, art_raw), (tit_rel, tits, tit_raw)):
        inputs.append(collections.OrderedDict([
            ("path", "gigaword/" + rel),
            ("lines", len(lines)),
            ("bytes", len(raw)),
            ("md5", md5_hex(raw)),
        ]))
    return arts, tits


def derive(giga):
    """Compute the derived files in memory.

    Returns (dict file name -> bytes, manifest OrderedDict without outputs)."""
    inputs = []
    test_arts, _ = load_piece(giga, TEST, inputs)
    valid_arts, _ = load_piece(giga, VALID, inputs)
    test_keys = set(key(a, is_test=True) for a in test_arts)
    valid_keys = set(key(a) for a in valid_arts)

    seen = set()
    all_art, all_tit, extra_art, extra_tit = [], [], [], []
    pieces = collections.OrderedDict()
    for piece in [TRAIN] + EXTRA:
        name = piece[0]
        arts, tits = load_piece(giga, piece, inputs)
        c = collections.OrderedDict([
            ("read", len(arts)), ("kept", 0), ("dropped_test", 0),
            ("dropped_valid", 0), ("dropped_duplicate", 0)])
        for art, tit in zip(arts, tits):
            k = key(art)
            if k in test_keys:
                c["dropped_test"] += 1
            elif k in valid_keys:
                c["dropped_valid"] += 1
            elif k in seen:
                c["dropped_duplicate"] += 1
            else:
                seen.add(k)
                c["kept"] += 1
                all_art.append(art)
                all_tit.append(tit)
                if piece is not TRAIN:
                    extra_art.append(art)
                    extra_tit.append(tit)
        pieces[name] = c

    def total(names):
        t = collections.OrderedDict()
        for f in ("read", "kept", "dropped_test", "dropped_valid",
                  "dropped_duplicate"):
            t[f] = sum(pieces[n][f] for n in names)
        return t

    def enc(lines):
        return "".join(l + "\n" for l in lines).encode("utf-8")

    files = collections.OrderedDict([
        ("train_extra.article.txt", enc(extra_art)),
        ("train_extra.title.txt", enc(extra_tit)),
        ("train_all.article.txt", enc(all_art)),
        ("train_all.title.txt", enc(all_tit)),
    ])
    manifest = collections.OrderedDict([
        ("generator", "data/gigaword/prepare_data.py"),
        ("rules", [
            "one pass over train_10k, valid_10k, valid_4k, valid_small "
            "(in this order), input order kept",
            "articles compared after stripping trailing ASCII whitespace; "
            "test-set 'UNK' read as '<unk>' for the comparison",
            "drop pair if article occurs in test_1951/input.txt (test), "
            "else in valid_1k (valid), else if already kept (duplicate, "
            "first occurrence wins)",
            "train_all = all kept pairs; train_extra = kept pairs from "
            "valid_10k, valid_4k, valid_small",
        ]),
        ("inputs", inputs),
        ("counts", collections.OrderedDict([
            ("train_extra", total([p[0] for p in EXTRA])),
            ("train_all", total([TRAIN[0]] + [p[0] for p in EXTRA])),
            ("per_piece", pieces),
        ])),
    ])
    outs = []
    for name, data in files.items():
        outs.append(collections.OrderedDict([
            ("path", "gigaword/{}/{}".format(OUT_DIR, name)),
            ("lines", data.count(b"\n")),
            ("bytes", len(data)),
            ("md5", md5_hex(data)),
        ]))
    manifest["outputs"] = outs
    files[MANIFEST] = (json.dumps(manifest, indent=2, ensure_ascii=False)
                       + "\n").encode("utf-8")
    return files, manifest


def write_if_changed(path, data):
    """Atomically write data to path unless it already holds exactly data."""
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return False
    except OSError:
        pass
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return True


def print_counts(manifest, out=sys.stdout):
    counts = manifest["counts"]
    fmt = "{:<14}{:>8}{:>8}{:>11}{:>12}{:>10}"
    out.write(fmt.format("piece", "read", "kept", "drop:test", "drop:valid",
                         "drop:dup") + "\n")
    rows = list(counts["per_piece"].items())
    rows += [("= train_extra", counts["train_extra"]),
             ("= train_all", counts["train_all"])]
    for name, c in rows:
        out.write(fmt.format(name, c["read"], c["kept"], c["dropped_test"],
                             c["dropped_valid"], c["dropped_duplicate"])
                  + "\n")


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(
        description="Derive deduplicated Gigaword training files "
                    "(data/gigaword/derived/).")
    ap.add_argument("--data-dir", default=os.path.join(here, os.pardir),
                    help="the data/ folder (default: <repo>/data)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="write nothing; exit 1 if derived files are "
                           "missing or differ from a fresh derivation")
    mode.add_argument("--if-missing", action="store_true",
                      help="do nothing if all derived files already exist")
    ap.add_argument("-q", "--quiet", action="store_true",
                    help="do not print the count table")
    args = ap.parse_args(argv)

    giga = os.path.normpath(os.path.join(args.data_dir, "gigaword"))
    out_dir = os.path.join(giga, OUT_DIR)
    names = OUTPUTS + [MANIFEST]

    if args.if_missing and all(
            os.path.isfile(os.path.join(out_dir, n)) for n in names):
        if not args.quiet:
            print("prepare_data: derived files present in {}, nothing to do"
                  .format(out_dir))
        return 0

    try:
        files, manifest = derive(giga)
    except DataError as e:
        sys.stderr.write("prepare_data: error: {}\n".format(e))
        return 2

    if not args.quiet:
        print_counts(manifest)

    if args.check:
        stale = []
        for n in names:
            p = os.path.join(out_dir, n)
            try:
                with open(p, "rb") as f:
                    ok = f.read() == files[n]
            except OSError:
                ok = False
            if not ok:
                stale.append(p)
        for p in stale:
            sys.stderr.write("prepare_data: stale or missing: {}\n".format(p))
        if not stale and not args.quiet:
            print("prepare_data: all derived files up to date")
        return 1 if stale else 0

    if not os.path.isdir(out_dir):
        os.makedirs(out_dir)
    changed = [n for n in names
               if write_if_changed(os.path.join(out_dir, n), files[n])]
    if not args.quiet:
        for o in manifest["outputs"]:
            print("{:<44}{:>7} lines {:>9} bytes  md5 {}".format(
                o["path"], o["lines"], o["bytes"], o["md5"]))
        print("prepare_data: {} file(s) written, {} unchanged, in {}".format(
            len(changed), len(names) - len(changed), out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
