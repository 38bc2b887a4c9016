#!/usr/bin/env python3
"""The images task's data (paper 003 §9 Table 1 at CPU scale): scikit-learn's copy of the UCI 8 x 8
handwritten digits (1,797 images, 10 classes; Debian's python3-sklearn ships it as
sklearn/datasets/data/digits.csv.gz) split into train / valid / test, 60 / 20 / 20 % of each class,
by a seeded shuffle. Writes data/digits/{train,valid,test}.csv in the file's own layout (64 pixels
0-16 row by row, then the digit) and prints the counts, class shares and SHA-256 sums that
data/digits/README.md records. Deterministic: rerunning writes the same bytes.

    /usr/bin/python3 data/digits/make_digits_data.py [--source PATH]
"""
import argparse
import gzip
import hashlib
import os
import random

SEED = 3
SHARES = (("train", 0.6), ("valid", 0.2), ("test", 0.2))
OUT = os.path.dirname(os.path.abspath(__file__))


def default_source():
    import sklearn  # only to find the file the package ships
    return os.path.join(os.path.dirname(sklearn.__file__), "datasets", "data", "digits.csv.gz")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", default=None, help="digits.csv.gz (default: python3-sklearn's)")
    args = parser.parse_args()
    source = args.source or default_source()
    with gzip.open(source, "rt") as f:
        rows = [line.strip() for line in f if line.strip()]
    assert len(rows) == 1797, len(rows)
    by_class = {}
    for row in rows:
        values = row.split(",")
        assert len(values) == 65 and all(0 <= int(v) <= 16 for v in values[:64]), row
        by_class.setdefault(int(values[64]), []).append(row)
    splits = {name: [] for name, _ in SHARES}
    rng = random.Random(SEED)
    for label in sorted(by_class):
        members = by_class[label][:]
        rng.shuffle(members)
        n = len(members)
        train_end = round(0.6 * n)
        valid_end = train_end + round(0.2 * n)
        splits["train"] += members[:train_end]
        splits["valid"] += members[train_end:valid_end]
        splits["test"] += members[valid_end:]
    for name, _ in SHARES:  # the slices of each class's shuffled list partition it: no image is in two splits
        rng.shuffle(splits[name])
    assert sum(len(split) for split in splits.values()) == len(rows)
    os.makedirs(OUT, exist_ok=True)
    for name, _ in SHARES:
        path = os.path.join(OUT, f"{name}.csv")
        text = "".join(row + "\n" for row in splits[name])
        with open(path, "w", newline="\n") as f:
            f.write(text)
        counts = [sum(1 for row in splits[name] if row.endswith("," + str(c))) for c in range(10)]
        majority = max(counts) / len(splits[name])
        print(f"{name}: {len(splits[name])} images; per class {counts}; majority class {100 * majority:.1f} %")
    for name, _ in SHARES:
        with open(os.path.join(OUT, f"{name}.csv"), "rb") as f:
            print(f"{hashlib.sha256(f.read()).hexdigest()}  {name}.csv")


if __name__ == "__main__":
    main()
