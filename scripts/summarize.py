#!/usr/bin/env python3
"""The markdown summaries of hnas's experiments, from the JSON that hnas writes (result.json,
metrics.jsonl, sweep.json, comparison.json, eval reports); each is written into its folder and printed.

    scripts/summarize.py sweep OUT [--metrics accuracy,…] [--pair a:b …]     OUT/diagnostics.md
        per setting of a sweep: test metrics (mean ± s.e. over seeds), the explaining-away statistics of
        every attention at each run's last validation (paper 004 Definition 1: the share of keys whose
        weight sum is below ε, the smallest sum × L_k) and hnas's u there; then the paired tests of the
        --pair differences a − b, or else by cell: settings named KIND_CELL, each non-first kind of a
        cell against the cell's first kind in the sweep's order
    scripts/summarize.py finetune OUT TASK…                                     (scripts/recipe.sh finetune)
        per task: each arm's chosen learning rate, test accuracy / MCC / F1 beside the majority-class
        baseline, the paired tests that answer its questions (does pretraining pay; does the real BERT
        beat hnas's own encoders; does switching a softmax-pretrained encoder to hnas or dnas change the
        score), and hnas's u per layer in the best checkpoints
    scripts/summarize.py recipe OUT INIT SEED KIND…                             OUT/summary.md
        scripts/recipe.sh gigaword's runs: each kind's test ROUGE beside the lead-8 baseline, then the
        first ten test articles (as they come) with their reference and each kind's headline
    scripts/summarize.py pretrain RUN_OR_SWEEP… [--out DIR] [--minutes 10,20,30,60] [--u-trajectory]
        masked-LM runs' validation masked-token accuracy against minutes of training (the last validation
        at or before each mark; "†" a finished run's final accuracy past its end), per encoder layer at
        the end hnas's u and the explaining-away statistics, with --u-trajectory u per layer at every
        validation: OUT/pretrain_curves.md and, with python3-matplotlib, pretrain_curves.png (and
        pretrain_u.png). Minutes compare only between runs that ran alike (alone, the same threads)
    scripts/summarize.py decoding OUT                                           OUT/decoding_grid.md
        scripts/recipe.sh decoding's grid, sorted by the mean of ROUGE-1, -2 and -L (also as JSON)
"""
import argparse
import glob
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail(message):
    sys.exit(f"summarize: {message}")


def publish(path, text):
    """Writes TEXT to PATH atomically and prints it."""
    with open(path + ".part", "w") as f:
        f.write(text)
    os.replace(path + ".part", path)
    print(text, end="")


def records(run):
    """metrics.jsonl's records, one dict per line."""
    with open(os.path.join(run, "metrics.jsonl")) as f:
        for number, line in enumerate(f, 1):
            try:
                yield json.loads(line)
            except json.JSONDecodeError as error:
                fail(f"{run}/metrics.jsonl:{number}: not JSON ({error})")


def mean_se(values, scale=1.0, digits=1):
    values = [scale * v for v in values]
    if len(values) < 2:
        return f"{values[0]:.{digits}f} (one seed)" if values else "–"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values) / math.sqrt(len(values)):.{digits}f}"


def pair(comparison, a, b, metric):
    """a − b from comparison.json's pairs, whichever order hnas compare listed them in: (pair, sign)."""
    for p in comparison["pairs"]:
        if p["metric"] == metric and (p["a"], p["b"]) in ((a, b), (b, a)):
            return p, 1.0 if p["a"] == a else -1.0
    return None, 0.0


def points(metric):
    """Points per unit of a metric as result.json holds it: ROUGE is in %, accuracies are fractions."""
    return 1.0 if metric.startswith("rouge") else 100.0


def sweep(args):
    metrics = args.metrics.split(",")
    sweep = json.load(open(os.path.join(args.out, "sweep.json")))
    comparison = json.load(open(os.path.join(args.out, "comparison.json")))
    names = [s["name"] for s in sweep["settings"]]
    if args.pair:
        tested = [tuple(item.rpartition(":")[::2]) for item in args.pair]
        for a, b in tested:
            if a not in names or b not in names:
                fail(f"--pair {a}:{b}: a and b must be among the sweep's settings ({', '.join(names)})")
    else:
        cells = {}
        for name in names:
            cells.setdefault(name.partition("_")[2], []).append(name)
        tested = [(other, members[0]) for members in cells.values() for other in members[1:]]
    lines = [f"Prediction, stated before the runs: {sweep['prediction']}", ""] if sweep.get("prediction") else []
    header = ["setting", "seeds"] + [f"test {m} %" for m in metrics] + [
        "attention", "keys below ε %", "keys below ε in every head %", "smallest sum × L_k (mean; min)", "u at the end"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    measured = None  # one run's diagnostics: ε and the validation's sequences, the same in every run
    for name in names:
        runs = [r for r in (os.path.join(args.out, name, f"seed-{s}") for s in sweep["seeds"])
                if os.path.exists(os.path.join(r, "result.json"))]
        if not runs:
            continue
        results = [json.load(open(os.path.join(r, "result.json")))["metrics"] for r in runs]
        for metric in metrics:
            if metric not in results[0]:
                fail(f"{runs[0]}/result.json has no test metric '{metric}' (it has {', '.join(sorted(results[0]))})")
        validations = []
        for run in runs:
            last = [r["diagnostics"] for r in records(run) if "diagnostics" in r]
            if not last:
                fail(f"{run}/metrics.jsonl has no validation with diagnostics")
            validations.append(last[-1])
        measured = validations[0]
        cells = [name, str(len(runs))] + [mean_se([r[m] for r in results], points(m)) for m in metrics]
        for i, attention in enumerate(measured["attentions"]):
            stats = [v["attentions"][attention] for v in validations]
            ratios = [min(s["min_ratio"]) for s in stats]
            # Runs before hnas recorded it have no every-head share.
            every_head = [100 * s["fraction_below_epsilon_in_every_head"] for s in stats
                          if "fraction_below_epsilon_in_every_head" in s]
            u = [v["hybrid_u_mean"][attention] for v in validations if attention in v["hybrid_u_mean"]]
            lines.append("| " + " | ".join((cells if i == 0 else [""] * len(cells)) + [
                attention, mean_se([100 * statistics.mean(s["fraction_below_epsilon"]) for s in stats], digits=2),
                mean_se(every_head, digits=2) if len(every_head) == len(stats) else "–",
                f"{statistics.mean(ratios):.3f}; {min(ratios):.3f}", mean_se(u, digits=3) if u else "–"]) + " |")
    if measured is None:
        fail(f"no run in {args.out} has a result.json yet")
    lines += ["", f"ε = {measured['epsilon']}; the statistics are those of each run's last validation "
              f"({measured['sequences']} sequences), the smallest sum over its keys times their count L_k.", "",
              "| a − b | metric | seeds | mean difference (points) | p (permutation over seeds) | p (bootstrap over test examples) |",
              "|---|---|---|---|---|---|"]
    for a, b in tested:
        for metric in metrics:
            found, sign = pair(comparison, a, b, metric)
            if found:
                boot = found.get("bootstrap")
                lines.append(f"| {a} − {b} | {metric} | {len(found['seeds'])} | "
                             f"{sign * points(metric) * found['mean_difference']:+.2f} | {found['permutation']['p_value']:.3g} | "
                             + (f"{boot['p_value']:.3g} |" if boot else "– (no per-example scores) |"))
    publish(os.path.join(args.out, "diagnostics.md"), "\n".join(lines) + "\n")


def hybrid_u(checkpoint):
    """Mean u over the heads of each encoder self-attention in a checkpoint, from `hnas analyze hybrid`'s JSON."""
    binary = os.environ.get("HNAS", os.path.join(ROOT, "build", "hnas"))
    with tempfile.TemporaryDirectory() as scratch:
        report = os.path.join(scratch, "hybrid.json")
        subprocess.run([binary, "analyze", "hybrid", "--checkpoint", checkpoint, "--output", report], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        attentions = json.load(open(report))["points"][-1]["attentions"]
    return [sum(a["u"]) / len(a["u"]) for a in attentions if a["name"].startswith("encoder.") and "self_attn" in a["name"]]


def finetune(args):
    print("# Fine-tuning: test-split scores (%) of each run's best validation checkpoint\n")
    for task in args.tasks:
        folder = os.path.join(args.out, task)
        comparison = json.load(open(os.path.join(folder, "comparison.json")))
        settings = {s["setting"]: s for s in comparison["settings"]}
        groups = sorted(glob.glob(os.path.join(folder, "chosen_*")), key=lambda g: g.endswith("_bert"))  # small first
        chosen = [a for group in groups for a in json.load(open(os.path.join(group, "settings.json")))]
        arms = [a["name"] for a in chosen if a["name"] in settings]
        rates = {a["name"]: a["set"]["train.learning_rate"] for a in chosen}
        print(f"## {task}\n")
        for group in groups:
            print(open(os.path.join(group, "learning_rates.md")).read())
        print(f"Mean ± standard error over {max(len(s['seeds']) for s in settings.values())} seeds:\n")
        print("| arm | learning rate | accuracy | MCC | F1 (class 1) | majority-class baseline |\n|---|---|---|---|---|---|")
        for arm in arms:
            m = settings[arm]["metrics"]
            cell = lambda k: "—" if k not in m else f"{100 * m[k]['mean']:.2f} ± {100 * m[k]['standard_error']:.2f}"
            print(f"| {arm} | {rates[arm]:g} | {cell('accuracy')} | {cell('mcc')} | {cell('f1')} | "
                  f"{100 * m['majority_baseline_accuracy']['mean']:.2f} |")
        kinds = [a.split("_", 1)[1] for a in arms if a.startswith("pretrained_")]
        scratch = [a for a in arms if a.startswith("scratch_")]
        questions = [(f"pretrained_{kind}", s) for kind in kinds for s in scratch if len(scratch) == 1 or s == f"scratch_{kind}"]
        questions += [(f"pretrained_{kind}", f"pretrained_{kinds[0]}") for kind in kinds[1:]]
        if "bert_lnas" in arms:
            questions += [("bert_lnas", "pretrained_lnas")] + [("bert_lnas", s) for s in scratch]
            questions += [(a, "bert_lnas") for a in arms if a.startswith("bert_") and a != "bert_lnas"]
        print("\nPaired differences in test accuracy (points): the exact permutation test over seeds, and the paired "
              "bootstrap over test examples (each example's correctness averaged over the seeds)\n")
        print("| a − b | seeds | mean difference | p (permutation, seeds) | p (bootstrap, examples) |\n|---|---|---|---|---|")
        for a, b in questions:
            found, sign = pair(comparison, a, b, "accuracy")
            if found:
                boot = found.get("bootstrap", {}).get("p_value")
                print(f"| {a} − {b} | {len(found['seeds'])} | {sign * 100 * found['mean_difference']:+.2f} | "
                      f"{found['permutation']['p_value']:.4f} | {'—' if boot is None else f'{boot:.4f}'} |")
        hybrid = {}
        for arm in (a for a in arms if a.endswith("_hnas")):
            per_run = [hybrid_u(c) for c in sorted(glob.glob(os.path.join(folder, "final_*", arm, "seed-*", "best.ckpt")))]
            hybrid[arm] = (len(per_run), [statistics.mean(layers) for layers in zip(*per_run)])
        if hybrid:
            depth = max(len(layers) for _, layers in hybrid.values())
            print("\nhnas's u per encoder layer (mean over heads and seeds) in the best checkpoint:\n")
            print("| arm | " + " | ".join(f"layer {i + 1}" for i in range(depth)) + " |\n|---|" + "---|" * depth)
            for arm, (runs, layers) in hybrid.items():
                print(f"| {arm} ({runs} seeds) | " + " | ".join([f"{u:.3f}" for u in layers] + [""] * (depth - len(layers))) + " |")
        print()


def recipe(args):
    initialization = {"bert": "⟨BERT,BERT⟩", "random": "⟨Random,Random⟩", "hfbert": "⟨BERT,BERT⟩ from the imported BERT"}[args.init]
    lead = json.load(open(os.path.join(args.out, "lead8.rouge.json")))
    rows = [("lead-8 baseline", [100 * lead[k]["f1"] for k in ("rouge-1", "rouge-2", "rouge-l")])]
    headlines = {}
    for kind in args.kinds:
        run = os.path.join(args.out, f"headline_{kind}-{args.init}-seed{args.seed}")
        metrics = json.load(open(os.path.join(run, "result.json")))["metrics"]
        rows.append((f"{initialization}, {kind} encoder", [metrics[k] for k in ("rouge_1", "rouge_2", "rouge_l")]))
        headlines[kind] = open(os.path.join(run, "test_outputs.txt")).read().splitlines()
    lines = ["| Gigaword test (1,951 pairs), ROUGE-1.5.5 -m F1 % | ROUGE-1 | ROUGE-2 | ROUGE-L |", "|---|---|---|---|"]
    lines += [f"| {name} | " + " | ".join(f"{value:.2f}" for value in values) + " |" for name, values in rows]
    lines += ["", "The first ten test articles:", ""]
    test = os.path.join(ROOT, "data", "gigaword", "test_1951")
    articles = open(os.path.join(test, "input.txt")).read().splitlines()[:10]
    references = open(os.path.join(test, "task1_ref0.txt")).read().splitlines()[:10]
    for i, (article, reference) in enumerate(zip(articles, references)):
        lines += [f"{i + 1}. article: {article}", f"   - reference: {reference}"]
        lines += [f"   - {kind}: {headlines[kind][i]}" for kind in args.kinds]
    publish(os.path.join(args.out, "summary.md"), "\n".join(lines) + "\n")


def accuracy_curve(run):
    """[(step, minutes, accuracy)] of a run's validations, the last record of a step winning. A resumed run
    re-logs the steps after its last checkpoint and counts its seconds from the resumption: they are added
    to the seconds the first life took to the step it resumed from."""
    elapsed, accuracy = {}, {}
    offset, previous = 0.0, -1.0
    for record in records(run):
        if "elapsed_seconds" in record:
            step, seconds = record["step"], record["elapsed_seconds"]
            if seconds < previous:  # resumed: from the newest step logged before this one
                earlier = [s for s in elapsed if s < step]
                offset = elapsed[max(earlier)] if earlier else 0.0
            previous = seconds
            elapsed[step] = offset + seconds
        if "validation_mlm_accuracy" in record:
            accuracy[record["step"]] = record["validation_mlm_accuracy"]
    missing = sorted(step for step in accuracy if step not in elapsed)
    if missing:
        fail(f"{run}: validations at steps {missing} have no progress line of the same step "
             "(set train.log_every to divide validation.every)")
    return [(step, elapsed[step] / 60.0, accuracy[step]) for step in sorted(accuracy)]


def pretrain(args):
    marks = [float(m) for m in args.minutes.split(",")]
    runs = []
    for path in args.paths:
        if not os.path.isdir(path):
            fail(f"{path} is not a directory")
        for folder, dirs, files in os.walk(path):
            dirs.sort()
            if "metrics.jsonl" in files:
                runs.append(folder)
    if not runs:
        fail(f"no metrics.jsonl under {' '.join(args.paths)}")
    common = os.path.commonpath([os.path.abspath(p) for p in args.paths])
    names = {run: os.path.relpath(os.path.abspath(run), common) for run in runs}
    names = {run: os.path.basename(os.path.abspath(run)) if name == "." else name for run, name in names.items()}
    curves = {run: accuracy_curve(run) for run in runs}
    lines = ["| run | " + " | ".join(f"accuracy at {m:g} min" for m in marks) +
             " | last validation: accuracy, step, minutes | minutes per 1,000 steps |",
             "| --- | " + " | ".join("---:" for _ in marks) + " | ---: | ---: |"]
    for run, curve in curves.items():
        if not curve:
            lines.append(f"| {names[run]} | " + " | ".join("–" for _ in marks) + " | no validation yet | – |")
            continue
        step, minutes, accuracy = curve[-1]
        config = os.path.join(run, "config.json")
        ended = os.path.exists(config) and step == json.load(open(config)).get("train", {}).get("steps")
        reached = []
        for mark in marks:  # "–" before the first validation, and after the last one of a run still training
            before = [value for _, at, value in curve if at <= mark]
            reached.append("–" if not before or (mark > minutes and not ended)
                           else f"{100 * before[-1]:.1f} %" + (" †" if mark > minutes else ""))
        lines.append(f"| {names[run]} | " + " | ".join(reached) +
                     f" | {100 * accuracy:.1f} % at {step}, {minutes:.1f} | {1000 * minutes / step:.2f} |")
    lines += ["", "† the run had ended (its last validation at its last step): its final accuracy, reached earlier.",
              "", "Per encoder layer at the end of each run: hnas's u (mean over heads), the smallest per-key weight sum × L",
              "over heads (≥ 1 under DNAS), the largest share of keys below ε (the last validation's diagnostics):", "",
              "| run | layer | kind | u | smallest Σ_i A_ij × L | keys below ε |", "| --- | --- | --- | ---: | ---: | ---: |"]
    trajectories = {}
    for run in runs:
        last_u, last, u_at = {}, {}, {}
        for record in records(run):
            last_u = record.get("hybrid_u") or last_u
            if "diagnostics" in record:
                last = record["diagnostics"]
                if last.get("hybrid_u_mean"):
                    u_at[record["step"]] = last["hybrid_u_mean"]
        trajectories[run] = sorted(u_at.items())
        for layer in dict.fromkeys(list(last.get("attentions", {})) + list(last_u)):
            attention = last.get("attentions", {}).get(layer)
            u = f"{statistics.mean(last_u[layer]):.3f}" if layer in last_u else "–"
            ratio = f"{min(attention['min_ratio']):.2f}" if attention else "–"
            below = f"{100 * max(attention['fraction_below_epsilon']):.1f} % (ε {last['epsilon']:g})" if attention else "–"
            lines.append(f"| {names[run]} | {layer} | {attention['kind'] if attention else '–'} | {u} | {ratio} | {below} |")
    if not args.u_trajectory:
        trajectories = {}
    for run, trajectory in trajectories.items():
        if trajectory:
            layers = list(trajectory[0][1])
            lines += ["", f"hnas's u per layer over pretraining, {names[run]} (mean over heads, at each validation):", "",
                      "| step | " + " | ".join(layers) + " |", "| ---: | " + " | ".join("---:" for _ in layers) + " |"]
            lines += [f"| {step} | " + " | ".join(f"{u.get(layer, math.nan):.3f}" for layer in layers) + " |"
                      for step, u in trajectory]
    out = args.out or args.paths[0]
    os.makedirs(out, exist_ok=True)
    publish(os.path.join(out, "pretrain_curves.md"), "\n".join(lines) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("summarize: no matplotlib (apt-get install python3-matplotlib; run /usr/bin/python3): no plot", file=sys.stderr)
        return
    figure, axes = plt.subplots(figsize=(8, 5))
    for run, curve in curves.items():
        axes.plot([p[1] for p in curve], [100 * p[2] for p in curve], marker="o", markersize=3, label=names[run])
    axes.set(xlabel="minutes of training", ylabel="validation masked-token accuracy (%)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(os.path.join(out, "pretrain_curves.png"), dpi=120)
    if any(trajectories.values()):
        figure, axes = plt.subplots(figsize=(8, 4))
        for run, trajectory in trajectories.items():
            for layer in (trajectory[0][1] if trajectory else {}):
                axes.plot([step for step, _ in trajectory], [u[layer] for _, u in trajectory], marker="o", markersize=3,
                          label=f"{names[run]} {layer.replace('encoder.layers.', 'layer ').replace('.self_attn', '')}")
        axes.set(xlabel="step", ylabel="hnas u (mean over heads)", ylim=(0, 1))
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
        figure.tight_layout()
        figure.savefig(os.path.join(out, "pretrain_u.png"), dpi=120)


def decoding(args):
    rows = []
    for path in glob.glob(os.path.join(args.out, "beam*.json")):
        report = json.load(open(path))
        settings, rouge = report["decoding"], report["rouge"]
        f1 = [100 * rouge[k]["f1"] for k in ("rouge-1", "rouge-2", "rouge-l")]
        hypotheses = [line.split() for line in open(path[:-len(".json")] + ".txt")]
        rows.append({"beam": settings["beam"], "length_penalty": settings["length_penalty"],
                     "no_repeat_ngram": settings["no_repeat_ngram"], "min_length": settings["min_length"],
                     "rouge_1": f1[0], "rouge_2": f1[1], "rouge_l": f1[2], "mean": sum(f1) / 3,
                     "words": sum(map(len, hypotheses)) / max(len(hypotheses), 1)})
    rows.sort(key=lambda row: -row["mean"])
    with open(os.path.join(args.out, "decoding_grid.json"), "w") as f:
        json.dump(rows, f, indent=1)
    lines = ["| beam | length penalty | no-repeat n-gram | min length | ROUGE-1 | ROUGE-2 | ROUGE-L | mean | words |",
             "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['beam']} | {r['length_penalty']} | {r['no_repeat_ngram']} | {r['min_length']} | {r['rouge_1']:.2f} | "
              f"{r['rouge_2']:.2f} | {r['rouge_l']:.2f} | {r['mean']:.2f} | {r['words']:.1f} |" for r in rows]
    publish(os.path.join(args.out, "decoding_grid.md"), "\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("sweep")
    command.add_argument("out")
    command.add_argument("--metrics", default="accuracy", help="comma-separated test metrics (default accuracy)")
    command.add_argument("--pair", action="append", help="a:b, a difference a − b to test; repeated (default: by cell)")
    command = commands.add_parser("finetune")
    command.add_argument("out")
    command.add_argument("tasks", nargs="+")
    command = commands.add_parser("recipe")
    command.add_argument("out")
    command.add_argument("init", choices=("bert", "random", "hfbert"))
    command.add_argument("seed")
    command.add_argument("kinds", nargs="+")
    command = commands.add_parser("pretrain")
    command.add_argument("paths", nargs="+", help="run directories or directories of runs")
    command.add_argument("--out", help="where the table and the plots go (default: the first path)")
    command.add_argument("--minutes", default="10,20,30,60", help="comma-separated minutes to read the curves at")
    command.add_argument("--u-trajectory", action="store_true", help="also hnas's u per layer at every validation")
    command = commands.add_parser("decoding")
    command.add_argument("out")
    args = parser.parse_args()
    globals()[args.command](args)


if __name__ == "__main__":
    main()
