#!/usr/bin/env python3
"""The fine-tuning tables of scripts/finetune_demo.sh, from its sweeps' comparison.json files.

    python3 scripts/finetune_summary.py runs/finetune headline_match sotu_era

Per task: each arm's chosen learning rate (validation, seed 1), test accuracy / MCC / F1 as mean ±
standard error over seeds beside the majority-class baseline, the paired tests that answer the
questions (does pretraining pay; does the real BERT beat hnas's own encoders; does switching a softmax-
pretrained encoder to hnas or dnas change the score), and hnas's u per layer at the end of fine-tuning.
"""
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HNAS = os.environ.get("HNAS", os.path.join(ROOT, "build", "hnas"))


def cell(metrics, key):
    m = metrics.get(key)
    return "—" if m is None else f"{m['mean']:.2f} ± {m['standard_error']:.2f}"


def pair(pairs, a, b, metric):
    """a − b from comparison.json's pairs, whichever order compare listed them in."""
    for p in pairs:
        if p["metric"] != metric:
            continue
        if (p["a"], p["b"]) == (a, b):
            return p, 1.0
        if (p["a"], p["b"]) == (b, a):
            return p, -1.0
    return None, 0.0


def hybrid_u(checkpoint):
    """Mean u over the heads of each encoder layer, from hnas inspect."""
    text = subprocess.run([HNAS, "inspect", checkpoint], check=True, capture_output=True, text=True).stdout
    layers = []
    for line in text.splitlines():
        m = re.match(r"hybrid u\s+encoder\.layers\.(\d+)\.self_attn\s+(.*)", line)
        if m:
            values = [float(v) for v in m.group(2).split()]
            layers.append(sum(values) / len(values))
    return layers


def main():
    out, tasks = sys.argv[1], sys.argv[2:]
    print("# Fine-tuning: test-split scores (%) of each run's best validation checkpoint\n")
    for task in tasks:
        comparison = json.load(open(os.path.join(out, task, "comparison.json")))
        settings = {s["setting"]: s for s in comparison["settings"]}
        groups = sorted(glob.glob(os.path.join(out, task, "chosen_*")), key=lambda g: g.endswith("_bert"))  # small first
        chosen = [a for group in groups for a in json.load(open(os.path.join(group, "settings.json")))]
        arms = [a["name"] for a in chosen if a["name"] in settings]
        rates = {a["name"]: a["set"]["train.learning_rate"] for a in chosen}
        print(f"## {task}\n")
        for group in groups:
            print(open(os.path.join(group, "learning_rates.md")).read())
        seeds = max(len(s["seeds"]) for s in settings.values())
        print(f"Mean ± standard error over {seeds} seeds:\n")
        print("| arm | learning rate | accuracy | MCC | F1 (class 1) | majority-class baseline |")
        print("|---|---|---|---|---|---|")
        for arm in arms:
            m = {k: {"mean": 100 * v["mean"], "standard_error": 100 * v["standard_error"]}
                 for k, v in settings[arm]["metrics"].items() if k in ("accuracy", "mcc", "f1")}
            baseline = 100 * settings[arm]["metrics"]["majority_baseline_accuracy"]["mean"]
            print(f"| {arm} | {rates[arm]:g} | {cell(m, 'accuracy')} | {cell(m, 'mcc')} | {cell(m, 'f1')} | {baseline:.2f} |")
        questions = []
        kinds = [a.split("_", 1)[1] for a in arms if a.startswith("pretrained_")]
        scratch = [a for a in arms if a.startswith("scratch_")]
        for kind in kinds:
            questions += [(f"pretrained_{kind}", s) for s in scratch if len(scratch) == 1 or s == f"scratch_{kind}"]
        for kind in kinds[1:]:
            questions.append((f"pretrained_{kind}", f"pretrained_{kinds[0]}"))
        if "bert_lnas" in arms:
            questions += [("bert_lnas", "pretrained_lnas")] + [("bert_lnas", s) for s in scratch]
            questions += [(a, "bert_lnas") for a in arms if a.startswith("bert_") and a != "bert_lnas"]
        print("\nPaired differences in test accuracy (points): the exact permutation test over seeds, and the paired "
              "bootstrap over test examples (each example's correctness averaged over the seeds)\n")
        print("| a − b | seeds | mean difference | p (permutation, seeds) | p (bootstrap, examples) |")
        print("|---|---|---|---|---|")
        for a, b in questions:
            if a not in settings or b not in settings:
                continue
            p, sign = pair(comparison["pairs"], a, b, "accuracy")
            if p is None:
                continue
            boot = p.get("bootstrap", {}).get("p_value")
            print(f"| {a} − {b} | {len(p['seeds'])} | {sign * 100 * p['mean_difference']:+.2f} | "
                  f"{p['permutation']['p_value']:.4f} | {'—' if boot is None else f'{boot:.4f}'} |")
        hybrid = {}
        for arm in (a for a in arms if a.endswith("_hnas")):
            per_run = [hybrid_u(c) for c in sorted(glob.glob(os.path.join(out, task, "final_*", arm, "seed-*", "best.ckpt")))]
            hybrid[arm] = (len(per_run), [sum(r[i] for r in per_run) / len(per_run) for i in range(len(per_run[0]))])
        if hybrid:
            depth = max(len(layers) for _, layers in hybrid.values())
            print("\nhnas's u per encoder layer (mean over heads and seeds) in the best checkpoint:\n")
            print("| arm | " + " | ".join(f"layer {i + 1}" for i in range(depth)) + " |")
            print("|---|" + "---|" * depth)
            for arm, (runs, layers) in hybrid.items():
                cells = [f"{u:.3f}" for u in layers] + [""] * (depth - len(layers))
                print(f"| {arm} ({runs} seeds) | " + " | ".join(cells) + " |")
        print()


if __name__ == "__main__":
    main()
