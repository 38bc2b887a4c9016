#!/usr/bin/python3
"""data/corpus/world_english_bible.txt: the World English Bible (public domain), one chapter per
blank-line-separated block, from Debian's sword-text-web module read through diatheke.

    apt-get install -y sword-text-web diatheke      # Debian 12: sword-text-web 426.0-1 (engWEB2015eb)
    python3 data/corpus/make_web_corpus.py [--out data/corpus/world_english_bible.txt]
    python3 data/corpus/make_web_corpus.py --check      # the shipped file against the held-out text, no diatheke

More English text for masked-LM pretraining (issue 48), public domain as the module's copyright file says.
diatheke prints each verse as "Book C:V: text" in OSIS markup; this keeps the verse text: word tags
dropped (119 places where the module has no space between two word tags get one), titles and notes
dropped, the psalm superscriptions diatheke repeats before every verse of a psalm left out, whitespace
squeezed. Verses of a chapter are joined by spaces (a chapter is a document for `unit: "block"`).
Sentences that also occur in a test or validation file (Gigaword's, and the text fields of the fine-tuning
tasks' valid and test TSVs; compared lowercased, letters and digits only) are dropped and counted. Prints the
counts and the file's sha256. --check counts the sentences of the existing file that occur there.
"""
import argparse
import collections
import hashlib
import os
import re
import shutil
import subprocess
import sys

MODULE = "engWEB2015eb"
KEY = re.compile(r"((?:I{1,3} |IV )?[A-Z][A-Za-z]*(?: (?:of|[A-Z][A-Za-z]*|\([A-Za-z]+\)))*) (\d+):(\d+): ")
HELD_OUT = ["data/gigaword/test_1951/input.txt", "data/gigaword/test_1951/task1_ref0.txt",
            "data/gigaword/valid_1k/valid.article.filter.txt", "data/gigaword/valid_1k/valid.title.filter.txt"]
HELD_OUT_TSV = [f"data/finetune/{task}.{split}.tsv" for task in ("headline_match", "sotu_era")
                for split in ("valid", "test")]  # every field but the label


def normalized(text):
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def held_out_sentences():
    held_out = set()
    for path in HELD_OUT:
        with open(path, encoding="utf-8") as f:
            held_out.update(normalized(line) for line in f)
    for path in HELD_OUT_TSV:
        with open(path, encoding="utf-8") as f:
            next(f)  # the header names the columns
            for line in f:
                held_out.update(normalized(field) for field in line.rstrip("\n").split("\t")[:-1])
    held_out.discard("")  # a blank line matches no sentence
    return held_out


def sentences_of(text):
    return re.split(r"(?<=[.!?])\s+", text)


def check(path):
    held_out = held_out_sentences()
    with open(path, encoding="utf-8") as f:
        sentences = [s for block in f.read().split("\n\n") for s in sentences_of(block.strip()) if s]
    found = sum(normalized(s) in held_out for s in sentences)
    print(f"make_web_corpus: {path}: {len(sentences)} sentences, {found} of them in held-out text")
    return found


def verse_text(markup):
    text = re.sub(r"<title[^>]*>.*?</title>", " ", markup)
    text = re.sub(r"<note[^>]*>.*?</note>", " ", text)
    text = text.replace("</w><w>", "</w> <w>")
    text = re.sub(r"<[^>]+>", "", text)
    return re.sub(r"\s+", " ", text).strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="data/corpus/world_english_bible.txt")
    parser.add_argument("--check", action="store_true", help="count the existing file's held-out sentences")
    args = parser.parse_args()
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    if args.check:
        sys.exit(1 if check(args.out) else 0)
    if shutil.which("diatheke") is None:
        sys.exit("make_web_corpus: diatheke is missing: apt-get install -y sword-text-web diatheke")
    osis = subprocess.run(["diatheke", "-b", MODULE, "-f", "OSIS", "-k", "Genesis 1:1-Revelation 22:21"],
                          capture_output=True, text=True, check=True).stdout
    chapters = collections.OrderedDict()
    for number, line in enumerate(osis.splitlines(), 1):
        if not line.strip() or line.strip() == f"({MODULE})":
            continue
        keys = list(KEY.finditer(line))
        if not keys:
            sys.exit(f"make_web_corpus: diatheke's line {number} has no verse key: {line[:120]!r}")
        last = keys[-1]  # what precedes it is a superscription repeated before each verse
        text = verse_text(line[last.end():])
        if text:
            chapters.setdefault((last.group(1), int(last.group(2))), []).append(text)
    if not chapters:
        sys.exit(f"make_web_corpus: diatheke gave no verses of {MODULE}")

    held_out = held_out_sentences()
    dropped = 0
    blocks = []
    for verses in chapters.values():
        sentences = sentences_of(" ".join(verses))
        kept = [s for s in sentences if normalized(s) not in held_out]
        dropped += len(sentences) - len(kept)
        blocks.append(" ".join(kept))
    text = "\n\n".join(blocks) + "\n"
    temporary = args.out + ".tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(temporary, args.out)
    books = len({book for book, _ in chapters})
    print(f"make_web_corpus: {args.out}: {books} books, {len(chapters)} chapters, {len(text.split())} words, "
          f"{len(text.encode())} bytes; {dropped} sentences dropped as held-out text; "
          f"sha256 {hashlib.sha256(text.encode()).hexdigest()}")


if __name__ == "__main__":
    main()
