"""A model fine-tuned in hnas, exported with `hnas export`, read by Hugging Face transformers:
all-MiniLM-L6-v2 imported with `hnas import-bert`, fine-tuned in hnas for a few steps on the
bundled sotu_era classification task (configs/finetune_sotu_era.json at MiniLM's shape, lnas attention,
WordPiece), exported with `hnas export`, loaded with BertModel.from_pretrained(folder), and compared with
hnas on the 200 lines of scripts/bert_parity.py: every layer's hidden states and the mean-pooled
embedding, real positions only, relative difference = max|hnas - transformers| / max|transformers|.
Also reports how far fine-tuning moved the encoder (the last layer's states before and after), so a
pass is not the untouched import.

    ~/.cache/hnas-peers/venv/bin/python scripts/export_parity.py [--steps 20] [--keep DIR]
"""

import argparse
import glob
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_parity as pc  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--keep", help="keep the run, the export and the states in this folder")
    args = parser.parse_args()
    pc.check_peers()
    import torch
    from transformers import BertModel
    torch.set_num_threads(os.cpu_count() or 1)
    work = args.keep or tempfile.mkdtemp(prefix="hnas_export_parity_")
    os.makedirs(work, exist_ok=True)
    imported = os.path.join(work, "minilm.ckpt")
    vocab = os.path.join(pc.MINILM, "vocab.txt")
    pc.run([pc.HNAS, "import-bert", "--weights", os.path.join(pc.MINILM, "model.safetensors"), "--vocab", vocab,
            "--config", os.path.join(pc.MINILM, "config.json"), "--out", imported])
    run_dir = os.path.join(work, "finetune")
    shutil.rmtree(run_dir, ignore_errors=True)
    settings = [f"init_from={imported}", "model.d_model=384", "model.heads=12", "model.ffn_dim=1536", "model.encoder_layers=6",
                "model.max_positions=512", "model.layer_norm_eps=1e-12", "model.attention.encoder.kind=lnas",
                "tokenizer.type=wordpiece", f"tokenizer.model={vocab}", f"train.steps={args.steps}", "train.warmup_steps=2",
                "train.learning_rate=0.0001", "train.log_every=5", f"validation.every={args.steps}",
                f"checkpoint.every={args.steps}", "data.batch_sentences=16", "data.max_seq=64"]
    command = [pc.HNAS, "train", "--config", os.path.join(pc.ROOT, "configs", "finetune_sotu_era.json"), "--out", run_dir]
    for s in settings:
        command += ["--set", s]
    pc.run(command, cwd=pc.ROOT)
    tuned = os.path.join(run_dir, "checkpoints", f"step-{args.steps:08d}.ckpt")  # the last step's checkpoint
    if not os.path.exists(tuned):
        sys.exit(f"no {tuned}; the run left {sorted(glob.glob(os.path.join(run_dir, '**', '*.ckpt'), recursive=True))}")
    with open(os.path.join(run_dir, "metrics.jsonl")) as metrics:
        losses = [record["loss"] for record in map(json.loads, metrics) if "loss" in record]
    print(f"fine-tuned MiniLM in hnas: {args.steps} steps of sotu_era classification, checkpoint {os.path.relpath(tuned, work)}"
          + (f"; logged losses {losses[0]:.4f} ... {losses[-1]:.4f}" if losses else ""))
    folder = os.path.join(work, "exported")
    pc.run([pc.HNAS, "export", "--checkpoint", tuned, "--out", folder])
    model = BertModel.from_pretrained(folder, attn_implementation="eager").eval()
    print(f"BertModel.from_pretrained({os.path.relpath(folder, work)}): {sum(p.numel() for p in model.parameters())} parameters")

    lines = pc.read_lines(pc.GIGAWORD_TEST, 100) + pc.sotu_sentences(100)
    lines_path = os.path.join(work, "lines.txt")
    with open(lines_path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    ours = pc.hnas_states(tuned, lines_path, os.path.join(work, "tuned.safetensors"), args.batch)
    before = pc.hnas_states(imported, lines_path, os.path.join(work, "imported.safetensors"), args.batch)
    theirs, pooled = pc.transformers_states(model, ours, args.batch)
    print(f"\n{len(lines)} lines, padded batches of {args.batch}; hnas (f32) vs transformers on the exported folder")
    print("| hidden state | max abs diff | max rel diff (max|a-b| / max|b|) |\n|---|---|---|")
    worst = 0.0
    for k, reference in enumerate(theirs):
        absolute, relative = pc.difference(ours[f"hidden.{k}"], reference)
        worst = max(worst, relative)
        print(f"| {'embeddings (0)' if k == 0 else f'layer {k}'} | {absolute:.3e} | {relative:.3e} |")
    absolute, relative = pc.difference(ours["mean_pooled"], pooled)
    worst = max(worst, relative)
    print(f"| mean-pooled embedding | {absolute:.3e} | {relative:.3e} |")
    last = len(theirs) - 1
    moved_abs, moved_rel = pc.difference(ours[f"hidden.{last}"], before[f"hidden.{last}"])
    print(f"\nfine-tuning moved the last layer's states by max {moved_abs:.3e} ({moved_rel:.3e} relative to the import's)")
    print(f"largest relative difference: {worst:.3e} ({'within' if worst <= 1e-4 else 'OUTSIDE'} 1e-4)")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if worst <= 1e-4 else 1)


if __name__ == "__main__":
    main()
