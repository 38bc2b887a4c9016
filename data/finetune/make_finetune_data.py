#!/usr/bin/python3
"""Derives the two fine-tuning demonstration tasks of issue 15 from bundled data, into data/finetune/.

    /usr/bin/python3 data/finetune/make_finetune_data.py

Deterministic (a fixed seed, the standard library only); prints the sizes, the label balance and the
majority-class baseline of every split, which data/finetune/README.md records.

headline_match (sentence pair, labels 0/1): a Gigaword article's first sentence and a headline; 1 when
  the headline is the article's own, 0 when it is the headline of another article of the same split
  (half of the examples each). train: data/gigaword/train_10k without the articles that occur in
  valid_1k or test_1951 (as data/gigaword/prepare_data.py drops them); valid: valid_1k; test: test_1951. So
  no article or headline crosses splits.
sotu_era (single text, 3 labels): a sentence of a State of the Union address and the era of the
  address: 1790-1860, 1861-1932 or 1933-2021. Whole addresses are assigned to train, valid or test
  (70/15/15 within each era, seeded), so no address crosses splits; sentences of 8-60 words, at most
  40 per address for train and 25 for valid and test, drawn at random.
"""

import hashlib
import os
import random
import re

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DATA = os.path.join(ROOT, "data")
OUT = os.path.join(DATA, "finetune")
SEED = 20261123


def read_lines(*parts):
    with open(os.path.join(DATA, *parts), encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def write_tsv(name, header, rows):
    path = os.path.join(OUT, name)
    with open(path + ".tmp", "w", encoding="utf-8", newline="\n") as f:
        f.write("\t".join(header) + "\n")
        for row in rows:
            assert all("\t" not in c and "\n" not in c for c in row), row
            f.write("\t".join(row) + "\n")
    os.replace(path + ".tmp", path)
    return path


def report(name, labels):
    counts = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    majority = max(counts.values()) / len(labels)
    balance = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
    print(f"{name}: {len(labels)} examples ({balance}); majority-class baseline {100 * majority:.1f} %")


def matched_pairs(articles, titles, rng):
    """Each article with its own headline (1) or another one's (0), half each, in a random order."""
    order = list(range(len(articles)))
    rng.shuffle(order)
    rows = []
    for position, i in enumerate(order):
        if position % 2 == 0:
            rows.append((articles[i], titles[i], "1"))
        else:
            j = rng.randrange(len(articles) - 1)
            j = j + 1 if j >= i else j
            rows.append((articles[i], titles[j], "0"))
    rng.shuffle(rows)
    return rows


def headline_match(rng):
    held_out = set(a.rstrip() for a in read_lines("gigaword", "valid_1k", "valid.article.filter.txt"))
    held_out |= set(a.rstrip().replace("UNK", "<unk>") for a in read_lines("gigaword", "test_1951", "input.txt"))
    train_articles, train_titles, seen = [], [], set()
    for article, title in zip(read_lines("gigaword", "train_10k", "train.article.txt"),
                              read_lines("gigaword", "train_10k", "train.title.txt")):
        key = article.rstrip()
        if key in held_out or key in seen or not article.strip() or not title.strip():
            continue
        seen.add(key)
        train_articles.append(article)
        train_titles.append(title)
    splits = {
        "train": (train_articles[:4000], train_titles[:4000]),
        "valid": (read_lines("gigaword", "valid_1k", "valid.article.filter.txt")[:600],
                  read_lines("gigaword", "valid_1k", "valid.title.filter.txt")[:600]),
        "test": (read_lines("gigaword", "test_1951", "input.txt")[:600],
                 read_lines("gigaword", "test_1951", "task1_ref0.txt")[:600]),
    }
    for split, (articles, titles) in splits.items():
        rows = matched_pairs(articles, titles, rng)
        write_tsv(f"headline_match.{split}.tsv", ["article", "headline", "label"], rows)
        report(f"headline_match {split}", [r[2] for r in rows])


def era(year):
    return "1790-1860" if year <= 1860 else "1861-1932" if year <= 1932 else "1933-2021"


SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")


def sotu_era(rng):
    addresses = read_lines("corpus", "sotu.txt")
    names = read_lines("corpus", "sotu.index.txt")
    by_era = {}
    for text, name in zip(addresses, names):
        if any(ord(c) < 32 and c != "\t" for c in text):
            continue  # line 101 holds a control byte (data/corpus/README.md)
        by_era.setdefault(era(int(name[:4])), []).append(text)
    rows = {"train": [], "valid": [], "test": []}
    for label, texts in sorted(by_era.items()):
        rng.shuffle(texts)
        n_valid = n_test = max(1, round(0.15 * len(texts)))
        assigned = {"test": texts[:n_test], "valid": texts[n_test:n_test + n_valid], "train": texts[n_test + n_valid:]}
        for split, group in assigned.items():
            per_address = 40 if split == "train" else 25
            for text in group:
                sentences = [s.strip() for s in SENTENCE_END.split(text)]
                sentences = [s.replace("\t", " ") for s in sentences if 8 <= len(s.split()) <= 60]
                rng.shuffle(sentences)
                rows[split] += [(s, label) for s in sentences[:per_address]]
    for split, split_rows in rows.items():
        rng.shuffle(split_rows)
        write_tsv(f"sotu_era.{split}.tsv", ["sentence", "era"], split_rows)
        report(f"sotu_era {split}", [r[1] for r in split_rows])


def main():
    os.makedirs(OUT, exist_ok=True)
    headline_match(random.Random(SEED))
    sotu_era(random.Random(SEED + 1))
    for name in sorted(os.listdir(OUT)):
        if name.endswith(".tsv"):
            with open(os.path.join(OUT, name), "rb") as f:
                print(f"{hashlib.sha256(f.read()).hexdigest()}  {name}")


if __name__ == "__main__":
    main()
