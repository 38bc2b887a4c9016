#!/usr/bin/env python3
"""The markdown summaries of hnas's experiments, from the JSON that hnas writes (result.json,
metrics.jsonl, sweep.json, comparison.json, eval reports); each is written into its folder and printed.

    scripts/summarize.py sweep OUT [--metrics accuracy,…] [--pair a:b …]     OUT/diagnostics.md
        per setting: test metrics, the explaining-away statistics (paper 004 Definition 1) and hnas's u at
        each run's last validation; then the paired tests of the --pair differences a − b, or else by cell
        (settings named KIND_CELL: each non-first kind of a cell against the cell's first kind)
    scripts/summarize.py finetune OUT TASK…                                     (scripts/recipe.sh finetune)
    scripts/summarize.py recipe OUT INIT SEED KIND…                             OUT/summary.md (recipe.sh gigaword)
    scripts/summarize.py pretrain RUN_OR_SWEEP… [--out DIR] [--minutes 10,20,30,60] [--u-trajectory]
        masked-LM validation accuracy against minutes of training, and per encoder layer u and the
        explaining-away statistics: OUT/pretrain_curves.md and, with python3-matplotlib, its plots
        (docs/pretraining.md). Minutes compare only between runs that ran alike (alone, the same threads)
    scripts/summarize.py decoding OUT                                           OUT/decoding_grid.md (recipe.sh decoding)
    scripts/summarize.py bench MODE ARGS…                                       scripts/bench.sh's internals
"""
import argparse
import contextlib
import glob
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

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
    for name in ("sweep.json", "comparison.json"):
        if not os.path.exists(os.path.join(args.out, name)):
            sys.exit(f"summarize sweep: {args.out} has no {name} (a finished sweep has both; `hnas compare {args.out}` "
                     "writes the comparison of an unfinished one)")
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
    def plot(name, height, series, **labels):  # series: (x, y, label) of each line
        figure, axes = plt.subplots(figsize=(8, height))
        for x, y, label in series:
            axes.plot(x, y, marker="o", markersize=3, label=label)
        axes.set(**labels)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
        figure.tight_layout()
        figure.savefig(os.path.join(out, name), dpi=120)
    plot("pretrain_curves.png", 5, [([p[1] for p in curve], [100 * p[2] for p in curve], names[run]) for run, curve in curves.items()],
         xlabel="minutes of training", ylabel="validation masked-token accuracy (%)")
    if any(trajectories.values()):
        plot("pretrain_u.png", 4, [([step for step, _ in trajectory], [u[layer] for _, u in trajectory],
                                    f"{names[run]} {layer.replace('encoder.layers.', 'layer ').replace('.self_attn', '')}")
                                   for run, trajectory in trajectories.items() for layer in (trajectory[0][1] if trajectory else {})],
             xlabel="step", ylabel="hnas u (mean over heads)", ylim=(0, 1))


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


# ---- scripts/bench.sh's records and tables: scripts/summarize.py bench MODE ARGS… (its internals) ----

def jsonl(path):
    return [json.loads(line) for line in open(path)]


def print_skipped(path):
    print("".join(f"Skipped {line.strip()}.\n" for line in open(path) if line.strip()), end="")


def spread(values, fmt):
    """The median, with [min–max] when there is more than one value."""
    text = fmt.format(statistics.median(values))
    return text + f" [{fmt.format(min(values))}–{fmt.format(max(values))}]" if len(values) > 1 else text


def max_rss_mib(path):
    """The maximum resident set size GNU time -v wrote to PATH."""
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(path).read()).group(1)) / 1024


def check_openblas(peer, blas, command):
    """Debian's PyTorch 1.13 falls back to the reference BLAS, about 26x slower, without OpenBLAS."""
    if peer == "torch113" and not any("openblas" in library for library in blas):
        sys.exit(f"bench.sh {command}: torch did not run on OpenBLAS ({blas}); the comparison would be unfair")


def peer_columns(runs, command):
    """Each run's column: hnas or its peer (torch113 is Debian's PyTorch 1.13); those present, in order."""
    for r in runs:
        r["column"] = "hnas" if r["impl"] == "hnas" else "torch113" if r["torch"].startswith("1.") else r.get("peer", "eager")
        check_openblas(r["column"], r.get("blas", []), command)
    return [c for c in ("torch113", "eager", "compile", "ipex") if any(r["column"] == c for r in runs)]


def table(columns, aligns):
    """A markdown table's head: the columns joined by " | ", aligns one letter a column (l left, r right)."""
    print(f"| {columns} |\n| " + " | ".join("---:" if a == "r" else "---" for a in aligns) + " |")


def compiling(units):
    return f"{len(units)}: " + ", ".join(map(str, units[:12])) + (" …" if len(units) > 12 else "")


def bench_train_check(checks):
    h, failed = None, False
    print("step-0 check (dropout off, same initial weights and batch):", file=sys.stderr)
    for t in jsonl(checks):
        if t["impl"] == "hnas":
            h = t
            continue
        rel = lambda a, b: abs(a - b) / max(abs(a), abs(b), 1e-30)
        peer = ("torch" + t["torch"].split("+")[0] + " " + t.get("peer", "eager")).ljust(19)
        loss_rel, norm_rel = rel(h["loss0_eval"], t["loss0_eval"]), rel(h["grad_norms"][0], t["grad_norms"][0])
        later = " ".join(f"step {i}: {a:.6f}/{b:.6f}" for i, (a, b) in enumerate(zip(h["losses"], t["losses"])) if i)
        ok = loss_rel <= 1e-4 and norm_rel <= 1e-3 and h["parameters"] == t["parameters"]
        failed |= not ok
        print(f"  {h['task']:8s} {h['kind']} {peer}: loss0 hnas {h['loss0_eval']:.7f} torch {t['loss0_eval']:.7f} (rel {loss_rel:.1e}); "
              f"|g|0 {h['grad_norms'][0]:.6f}/{t['grad_norms'][0]:.6f} (rel {norm_rel:.1e}); parameters "
              f"{h['parameters']}/{t['parameters']}; {later} {'ok' if ok else 'MISMATCH'}", file=sys.stderr)
    sys.exit(1 if failed else 0)


def bench_train(results, skipped):
    runs = jsonl(results)
    present = peer_columns(runs, "train")
    version = lambda c: next(r["torch"].split("+")[0] for r in runs if r["column"] == c)
    title = {"torch113": lambda: f"PyTorch {version('torch113')} f32", "eager": lambda: f"PyTorch {version('eager')} eager",
             "compile": lambda: "torch.compile", "ipex": lambda: "IPEX " + next(r["ipex"] for r in runs if r["column"] == "ipex")}
    short = {"torch113": "1.13", "eager": "eager", "compile": "compile", "ipex": "IPEX"}
    pick = lambda col, task, kind, key: [r[key] for r in runs if r["column"] == col and r["task"] == task
                                         and r["kind"] == kind and key in r]
    med = statistics.median
    configs = list(dict.fromkeys((r["task"], r["kind"]) for r in runs))
    precision = next(r.get("precision", "f32") for r in runs if r["impl"] == "hnas")
    head = ["task", "kind", "precision", "hnas ms"] + [f"{title[c]()} ms" for c in present] \
        + [f"hnas / {short[c]} speed" for c in present] \
        + ["step / bound in cache", "step / bound evicted", "ceiling: fastest peer / bound"] \
        + [f"peak RSS hnas / {short[c]}" for c in present]
    table(" | ".join(head), "lll" + "r" * len(head[3:]))
    for task, kind in configs:
        hm = pick("hnas", task, kind, "step_ms_median")
        cells = [task, kind, precision, spread(hm, "{:.1f}")]
        cells += [spread(pick(c, task, kind, "step_ms_median"), "{:.1f}") for c in present]
        cells += [f"{med(pick(c, task, kind, 'step_ms_median')) / med(hm):.2f}" for c in present]
        cells += [spread(pick("hnas", task, kind, "step_over_matmul_bound"), "{:.2f}"),
                  spread(pick("hnas", task, kind, "step_over_matmul_bound_evicted"), "{:.2f}")]
        fastest = min((med(pick(c, task, kind, "step_ms_median")) for c in present), default=None)
        cells += [f"{fastest / med(pick('hnas', task, kind, 'matmul_bound_ms')):.2f}" if fastest else "–"]
        cells += [f"{med(pick('hnas', task, kind, 'peak_rss_mib')) / med(pick(c, task, kind, 'peak_rss_mib')):.2f}"
                  for c in present]
        print("| " + " | ".join(cells) + " |")
    first = runs[0]
    rounds = len(pick("hnas", *configs[0], "step_ms_median"))
    print(f"\nMedians over {rounds} round(s) [min–max]; each run {first['warmup']} warm-up + {first['steps']} timed steps, "
          f"{first['threads']} threads; PyTorch 2 peers in {precision}" + (" (torch.autocast)" if precision == "bf16" else "")
          + ", PyTorch 1.13 in f32; speed = peer ms / hnas ms (medians); bound = one step's matrix products, each timed "
          "alone in oneDNN with the step's shapes and layouts (hnas-bench train --matmul-bound), summed; evicted: the "
          f"same with a {next(r['matmul_bound_evict_mib'] for r in runs if r['impl'] == 'hnas')} MiB buffer written "
          "before each product; ceiling = the fastest peer's ms / hnas's bound in cache: hnas's speed over that peer were "
          "its step its products alone.")
    print_skipped(skipped)
    if "compile" in present:
        print("\n| task | kind | precision | torch.compile first step s (compiles) | compile s (first step − median step) |")
        print("| --- | --- | --- | ---: | ---: |")
        for task, kind in configs:
            print(f"| {task} | {kind} | {precision} | {spread(pick('compile', task, kind, 'first_step_s'), '{:.1f}')} | "
                  f"{spread(pick('compile', task, kind, 'compile_s'), '{:.1f}')} |")
    print("\nPeak RSS MiB (medians) and model GFLOP/s (3 × forward matmul FLOPs / median step):")
    for task, kind in configs:
        rss = ", ".join(f"{short.get(c, c)} {med(pick(c, task, kind, 'peak_rss_mib')):.0f}" for c in ["hnas"] + present)
        gflops = ", ".join(f"{short.get(c, c)} {med(pick(c, task, kind, 'model_gflop_per_s')):.1f}" for c in ["hnas"] + present)
        print(f"  {task} {kind}: RSS {rss}; GFLOP/s {gflops} "
              f"({pick('hnas', task, kind, 'model_gflop_per_step')[0]:.1f} GFLOP per step)")


def bench_real_hnas(out, name, steps, precision):
    """One `hnas train` run of bench.sh real as a JSON line. NAME is CONFIG-IMPL-ROUND."""
    run = list(records(f"{out}/{name}"))
    last = next(r for r in run if "elapsed_seconds" in r and r["step"] == int(steps))
    memory = [r["memory"] for r in run if "memory" in r]
    # An older hnas (a --baseline) may have recorded memory only at validations (mlm.json has none), and no profile.
    profile = last.get("profile", {})
    print(json.dumps({"name": name, "impl": name.split("-")[1], "round": int(name.split("-")[2]), "precision": precision,
                      "seconds": last["elapsed_seconds"], "loss": last["loss"], "max_rss_mib": max_rss_mib(f"{out}/{name}.time"),
                      "live_peak_mib": max(m["tensor_live_peak"] for m in memory) / 2**20 if memory else None,
                      "minor_faults": profile.get("minor_faults"), "matmul_primitives": profile.get("matmul_primitives")}))


def bench_real_peer(out, name, peer):
    """One peer's run of bench.sh real as a JSON line, its step-0 loss checked against hnas's."""
    twin = json.load(open(f"{out}/{name}.json"))
    relative = abs(twin["loss0_eval"] - twin["hnas_loss0_eval"]) / abs(twin["hnas_loss0_eval"])
    print(f"bench.sh real: {name}: step-0 loss (f32, dropout off) {twin['loss0_eval']:.7f}, hnas {twin['hnas_loss0_eval']:.7f} "
          f"(relative {relative:.1e}) {'ok' if relative <= 1e-4 else 'MISMATCH: not the same model'}", file=sys.stderr)
    if relative > 1e-4:
        sys.exit(1)
    check_openblas(peer, twin["blas"], "real")
    record = {"name": name, "impl": peer, "round": int(name.split("-")[2]), "precision": twin["precision"],
              "seconds": twin["seconds"], "loss": twin["losses"][-1]["loss"], "max_rss_mib": max_rss_mib(f"{out}/{name}.time"),
              "loss0_relative": relative, "torch": twin["torch"].split("+")[0]}
    kept = ("ipex", "loss0_eval_s", "seconds_without_compiling", "compiling_units", "compiling_seconds", "graphs_before", "graphs",
            "frames_left_eager", "cache_size_limit")
    record.update({key: twin[key] for key in kept if key in twin})
    print(json.dumps(record))


def bench_real(results, steps, skipped):
    runs = jsonl(results)
    titles = {"hnas": "hnas", "baseline": "hnas baseline", "torch113": "PyTorch {torch}", "eager": "PyTorch {torch} eager",
              "compile": "torch.compile", "ipex": "IPEX {ipex}"}
    seconds = lambda r: r.get("seconds_without_compiling", r["seconds"])  # torch.compile: every step at the others' rate
    table(f"config | run | precision | max RSS MiB | tensor live peak MiB | RSS / live peak | seconds to step {steps} | "
          "hnas speed / run's | hnas max RSS / run's | loss (last 50 steps) | minor faults | matmul primitives", "lll" + "r" * 9)
    for config, impl in dict.fromkeys((r["name"].split("-")[0], r["impl"]) for r in runs):
        mine = sorted((r for r in runs if r["name"].startswith(config + "-") and r["impl"] == impl), key=lambda r: r["round"])
        hnas = {r["round"]: r for r in runs if r["name"].startswith(config + "-") and r["impl"] == "hnas"}
        live = [r["live_peak_mib"] for r in mine if r.get("live_peak_mib")]
        if any("compiling_units" in r and "seconds_without_compiling" not in r for r in mine):
            time, speed = spread([r["seconds"] for r in mine], "{:.1f}") + " (every step compiled)", "–"
        else:
            time = spread([seconds(r) for r in mine], "{:.1f}") + (" (without its compiling steps)" if "compiling_units" in mine[0] else "")
            speed = spread([seconds(r) / hnas[r["round"]]["seconds"] for r in mine], "{:.2f}")
        cells = [config, titles[impl].format(**mine[0]), mine[0]["precision"], spread([r["max_rss_mib"] for r in mine], "{:.0f}"),
                 spread(live, "{:.0f}") if live else "–",
                 spread([r["max_rss_mib"] / r["live_peak_mib"] for r in mine if r.get("live_peak_mib")], "{:.2f}") if live else "–",
                 time, speed, spread([hnas[r["round"]]["max_rss_mib"] / r["max_rss_mib"] for r in mine], "{:.2f}"),
                 f"{mine[-1]['loss']:.4f}", str(mine[-1].get("minor_faults") or "–"), str(mine[-1].get("matmul_primitives") or "–")]
        print("| " + " | ".join(cells) + " |")
    checked = [r for r in runs if "loss0_relative" in r and r["round"] == 1]
    if checked:
        print("\nStep-0 loss (f32, dropout off, same parameters and batch, each peer's own forward) against hnas's, relative: " +
              ", ".join(f"{r['name'].rsplit('-', 1)[0]} {r['loss0_relative']:.1e}" for r in checked) + " (each ≤ 1e-4).")
    compiled = [r for r in runs if "compiling_units" in r]
    if compiled:
        print(f"\ntorch.compile (default mode, dynamic=None; config.cache_size_limit {compiled[0]['cache_size_limit']}): the "
              "steps during which it compiled a graph, left out of its seconds above:\n")
        table(f"config | round | precision | step-0 check s (its own f32 graph) | compiling steps (from 0) | their seconds | "
              f"graphs compiled (check / steps) | frames left eager | seconds to step {steps} with them", "lrlrlrrrr")
        for r in compiled:
            print(f"| {r['name'].split('-')[0]} | {r['round']} | {r['precision']} | {r['loss0_eval_s']:.1f} | "
                  f"{compiling(r['compiling_units'])} | {r['compiling_seconds']:.1f} | {r['graphs_before']} / {r['graphs']} | "
                  f"{r['frames_left_eager']} | {r['seconds']:.1f} |")
    print_skipped(skipped)


def bench_decode(results, skipped):
    runs = jsonl(results)
    order = ["hnas"] + peer_columns(runs, "decode")
    titles = {"hnas": "hnas", "torch113": "PyTorch {torch}", "eager": "PyTorch {torch} eager", "compile": "torch.compile",
              "ipex": "IPEX {ipex}"}
    rate = lambda r: r.get("articles_per_s_without_compiling", r["articles_per_s"])  # torch.compile: batches compiling nothing
    table("beam | run | precision | articles | articles/s | hnas speed / run's | generated tokens | same best hypothesis as hnas | "
          "peak RSS MiB", "rll" + "r" * 6)
    for beam in sorted({r["beam"] for r in runs}):
        hnas = [r for r in runs if r["beam"] == beam and r["column"] == "hnas"]
        for who in order:
            mine = [r for r in runs if r["beam"] == beam and r["column"] == who]
            if any("compiling_units" in r and "articles_per_s_without_compiling" not in r for r in mine):
                speed, ratio = spread([r["articles_per_s"] for r in mine], "{:.1f}") + " (every batch compiled)", "–"
            else:
                ratio = spread([rate(h) / rate(r) for h, r in zip(hnas, mine)], "{:.2f}")
                speed = spread([rate(r) for r in mine], "{:.1f}") + (" (without its compiling batches)" if "compiling_units" in mine[0] else "")
            same = f"{mine[-1]['same_as_hnas']}/{mine[-1]['articles']}" if who != "hnas" else "–"
            print(f"| {beam} | {titles[who].format(**mine[0])} | {mine[0].get('precision', 'f32')} | {mine[0]['articles']} | {speed} | "
                  f"{ratio} | {mine[-1]['generated_tokens']} | {same} | {max(r['peak_rss_mib'] for r in mine):.0f} |")
    compiled = [r for r in runs if "compiling_units" in r]
    if compiled:
        print(f"\ntorch.compile (default mode, dynamic=None; config.cache_size_limit {compiled[0]['cache_size_limit']}) of the "
              "encoder and of one decoder step (the beam search stays eager): graphs compiled on the untimed first batch, "
              "and the batches of the timed pass during which it compiled more, left out of its articles/s above:\n")
        table("beam | round | graphs compiled (warm-up / timed pass) | compiling batches (from 0) | their seconds | "
              "frames left eager | articles/s with them", "rrrlrrr")
        for beam in sorted({r["beam"] for r in compiled}):
            for round, r in enumerate((r for r in compiled if r["beam"] == beam), 1):
                print(f"| {beam} | {round} | {r['graphs_before']} / {r['graphs']} | {compiling(r['compiling_units'])} | "
                      f"{r['compiling_seconds']:.1f} | {r['frames_left_eager']} | {r['articles_per_s']:.1f} |")
    print_skipped(skipped)


def bench_ddp_run(out, name, link, skip, steps):
    """One 2-rank run of bench.sh ddp as a JSON line: seconds per step from step SKIP on, and the gradient wait."""
    skip, steps = int(skip), int(steps)
    progress = {r["step"]: r for r in records(f"{out}/{name}") if "elapsed_seconds" in r}
    seconds = (progress[steps]["elapsed_seconds"] - progress[skip]["elapsed_seconds"]) / (steps - skip)
    # Each log's gradient wait is the mean over the steps since the previous log; builds before the
    # overlap (a --baseline) did not record it.
    windows = [(s, r["distributed"]) for s, r in sorted(progress.items()) if skip < s <= steps and "distributed" in r]
    previous = [skip] + [s for s, _ in windows[:-1]]

    def mean(key):
        missing = not windows or any(key not in d for _, d in windows)
        return None if missing else sum(d[key] * (s - p) for (s, d), p in zip(windows, previous)) / (steps - skip)
    last = windows[-1][1] if windows else {}
    print(json.dumps({"name": name, "link": link, "step_seconds": seconds, "wait_seconds": mean("gradient_wait_seconds_per_step"),
                      "backward_seconds": mean("backward_seconds_per_step"), "gradient_floats": last.get("gradient_floats"),
                      "last_bucket_floats": last.get("gradient_floats_last_bucket")}))


def bench_ddp(results, rate_text, delay_text, link, link_kind):
    groups = {}
    for r in jsonl(results):
        config, binary, speed, _ = r["name"].split("-")
        groups.setdefault((config, binary), {}).setdefault(speed, []).append(r)

    median = lambda values: statistics.median(kept) if (kept := [v for v in values if v is not None]) else None
    cell = lambda value, digits=4: "–" if value is None else f"{value:.{digits}f}"

    def measured_ratio(config, binary):
        links = groups.get((config, binary))
        return f"{statistics.median(s['step_seconds'] / f['step_seconds'] for f, s in zip(links['fast'], links['slow'])):.2f}" if links else ""

    table("config | binary | s/step fast link | s/step slow link | slow / fast | gradient wait s/step fast | slow | "
          "backward s/step | gradient floats | last bucket", "ll" + "r" * 8)
    for (config, binary), links in groups.items():
        fast, slow = links["fast"], links["slow"]
        ratios = [s["step_seconds"] / f["step_seconds"] for f, s in zip(fast, slow)]
        print(f"| {config} | {binary} | {cell(median([r['step_seconds'] for r in fast]))} | "
              f"{cell(median([r['step_seconds'] for r in slow]))} | {statistics.median(ratios):.3f} "
              f"[{min(ratios):.3f}–{max(ratios):.3f}] | {cell(median([r['wait_seconds'] for r in fast]))} | "
              f"{cell(median([r['wait_seconds'] for r in slow]))} | {cell(median([r['backward_seconds'] for r in fast]))} | "
              f"{fast[0]['gradient_floats'] or '–'} | {fast[0]['last_bucket_floats'] or '–'} |")

    # The model (docs/distributed.md, "Scaling"): ring all-reduce over N machines, each with a full-duplex
    # link of `rate` and `delay` per message; weak scaling (each machine keeps this run's per-rank batch,
    # so its compute per step stays as measured); the sums overlap the backward pass except the last
    # bucket's, whose gradients are final only at its end.
    number, unit = re.fullmatch(r"([0-9.]+)([a-z]+)", rate_text).groups()
    bytes_per_second = float(number) * {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[unit] / 8
    number, unit = re.fullmatch(r"([0-9.]+)(ms|us|s)", delay_text).groups()
    latency = float(number) * {"s": 1, "ms": 1e-3, "us": 1e-6}[unit]

    def step(compute, backward, floats, tail_floats, machines, bandwidth, alpha, bytes_per_float):
        share = 2 * (machines - 1) / machines
        total = share * bytes_per_float * floats / bandwidth + 2 * (machines - 1) * alpha
        tail = share * bytes_per_float * tail_floats / bandwidth + 2 * (machines - 1) * alpha
        return compute + max(tail, total - backward)

    # On the loopback both directions share one queue: half the rate each way.
    here_link = "veth pair, full duplex" if link_kind == "pair" else "loopback, both directions sharing the rate"
    here_bandwidth = bytes_per_second if link_kind == "pair" else bytes_per_second / 2
    print(f"\nModel: step time over its compute alone; ring all-reduce; full-duplex links of {rate_text} (and 10x) "
          f"with {delay_text} per message; weak scaling from the fast-link runs' compute (step minus gradient wait), "
          f"backward time, and the last bucket's floats summed after it. The first row per config is this run's "
          f"2 ranks on its {here_link} ({link}), beside the measured slow / fast.")
    table("config | machines | link | f32 sums | bf16 sums | measured f32 | measured bf16", "lrlrrrr")
    for (config, binary), links in groups.items():
        fast = links["fast"]
        if binary != "hnas" or fast[0]["gradient_floats"] is None:
            continue
        compute = median([r["step_seconds"] - r["wait_seconds"] for r in fast])
        backward = median([r["backward_seconds"] for r in fast])
        floats, tail = fast[0]["gradient_floats"], fast[0]["last_bucket_floats"]
        alpha_here = 0.0 if "no added delay" in link else latency
        here = [step(compute, backward, floats, tail, 2, here_bandwidth, alpha_here, b) / compute for b in (4, 2)]
        print(f"| {config} | 2 | this {link_kind} | {here[0]:.2f} | {here[1]:.2f} | {measured_ratio(config, 'hnas')} | "
              f"{measured_ratio(config, 'hnasbf16')} |")
        for machines in (8, 64):
            for scale, name in ((1, rate_text), (10, f"10x {rate_text}")):
                model = [step(compute, backward, floats, tail, machines, scale * bytes_per_second, latency, b) / compute
                         for b in (4, 2)]
                print(f"| {config} | {machines} | {name} | {model[0]:.2f} | {model[1]:.2f} | | |")


# bench.sh profile: perf's symbols in families; the first matching family wins, matched against
# "DSO [space] symbol" (demangled).
FAMILIES = [
    ("matmul (oneDNN: JIT kernels and library)", r"^libdnnl|^\[JIT\]|dnnl::|jit:|brgemm"),
    ("bf16 operand conversion (f32 -> bf16)", r"convert_to_bf16|round_to_bf16"),
    ("OpenMP runtime (libgomp: spin-waiting at barriers, team start)", r"^libgomp|GOMP_|gomp_"),
    ("attention normalization (softmax/DNAS/HNAS)", r"normalize_attention|hybrid_attention|normalize_rows|ops::.*attention|softmax|load_masked|Normalization::|BlockedCore"),
    ("layer norm", r"layer_norm|sum_row|row_statistics|row_gradient_means"),
    ("model initialization (not the step)", r"Rng::normal_tensor|Rng::uniform_tensor|init_xavier|init_normal|__cos|__sin"),
    ("GELU (incl. libm erff)", r"gelu|erf"),
    ("dropout", r"dropout|masked_gradient|drop_weights|apply_kept"),
    ("cross-entropy / log-softmax", r"cross_entropy|log_softmax|logsumexp"),
    ("exp (libm, softmax / cross-entropy)", r"__expf|__exp|expf@plt"),
    ("embedding gather/scatter", r"embedding"),
    ("permute / transpose / slice copies", r"permute|copy_axis|slice|transpose|concat"),
    ("broadcast elementwise (add, mul, scale)", r"broadcast_binary|map_unary|elementwise|ops::add|ops::mul|scale"),
    ("reductions (bias grads, sums)", r"accumulate_reduced|reduce|ops::sum|linear_bias_gradient|RowBlockSums"),
    ("optimizer (Adam, LAMB)", r"Optimizer::step|adam_stretch|lamb_moments|lamb_step"),
    ("gradient clipping (norms)", r"clip_factors|squared_norm"),
    ("autograd bookkeeping", r"Var::|Node|GradSink|make_result|backward|shared_ptr|std::function"),
    ("memcpy / memset", r"memcpy|memset|memmove"),
    ("allocation (malloc/free, pool)", r"malloc|free|_int_|cfree|operator new|operator delete|Storage|aligned_alloc|tcache|mmap|munmap|brk"),
    ("kernel: page faults, zeroing pages", r"clear_page|page_fault|do_anonymous|handle_mm_fault|asm_exc_page|__handle|alloc_pages|rmqueue|zap_|unmap|lru|memcg"),
    ("kernel: futex / scheduling", r"futex|sched_yield|schedule|finish_task_switch"),
    ("kernel: other", r"^\[k\]|entry_SYSCALL|syscall|schedule|irq|do_syscall"),
]


def bench_profile(report):
    """perf report -n's lines in families, each family's share of all samples (from the counts, not perf's
    rounded per-symbol percentages)."""
    totals, examples = {}, {}
    for line in open(report):
        m = re.match(r"\s*[\d.]+%\s+(\d+)\s+(\S.*?)\s+(\[.\])\s+(.*\S)\s*$", line)
        if not m:
            continue
        samples, dso, space, symbol = int(m.group(1)), m.group(2).strip(), m.group(3), m.group(4)
        name = f"{dso} {space} {symbol}"
        family = next((label for label, pattern in FAMILIES if re.search(pattern, name)),
                      "kernel: other" if space == "[k]" else "other")
        totals[family] = totals.get(family, 0) + samples
        examples.setdefault(family, []).append((samples, symbol))
    if not totals:
        sys.exit(f"bench.sh profile: no samples in {report} (perf report -n's lines expected)")
    everything = sum(totals.values())
    percent = lambda samples: 100.0 * samples / everything
    print(f"{'family':48s} {'% of samples':>12s}  top symbols ({everything} samples)")
    for family, samples in sorted(totals.items(), key=lambda kv: -kv[1]):
        top = "; ".join(f"{s[:70]} {percent(n):.1f}" for n, s in sorted(examples[family], reverse=True)[:3])
        print(f"{family:48s} {percent(samples):12.1f}  {top}")


def bench_bf16(window, steps, *runs):
    window, steps = int(window), int(steps)
    table(f"config | steps | max rel. diff of {window}-step moving averages | max rel. diff per step | "
          f"final {window}-step mean f32 / bf16 | median input tokens/s f32 / bf16 | within 1 %", "lrrrlll")
    failed = False
    for run in runs:
        curves, rates = {}, {}
        for precision in ("f32", "bf16"):
            progress = [r for r in records(f"{run}/{precision}") if "loss" in r]
            curves[precision] = [r["loss"] for r in progress]
            rates[precision] = statistics.median(r["input_tokens_per_second"] for r in progress)
        a, b = curves["f32"], curves["bf16"]
        if len(a) != steps or len(b) != steps:
            sys.exit(f"bench.sh bf16: {run}: expected {steps} logged steps, got {len(a)} (f32) and {len(b)} (bf16)")
        # Trailing moving averages over full windows only: steps window..N.
        mean = lambda xs, i: sum(xs[i - window:i]) / window
        smoothed = max(abs(mean(b, i) / mean(a, i) - 1) for i in range(window, steps + 1))
        per_step = max(abs(y / x - 1) for x, y in zip(a, b))
        failed |= smoothed >= 0.01
        print(f"| {run.rstrip('/').split('/')[-1]} | {steps} | {100 * smoothed:.3f} % | {100 * per_step:.3f} % | "
              f"{mean(a, steps):.4f} / {mean(b, steps):.4f} | {rates['f32']:.0f} / {rates['bf16']:.0f} | "
              f"{'yes' if smoothed < 0.01 else 'NO'} |")
    sys.exit(1 if failed else 0)


def bench_twin(out, config, steps):
    steps = int(steps)
    twin = json.load(open(f"{out}/twin.json"))
    hnas = {r["step"]: r for r in records(f"{out}/hnas") if "elapsed_seconds" in r}  # a resumed run's last record of a step
    relative0 = abs(twin["loss0_eval"] - twin["hnas_loss0_eval"]) / abs(twin["hnas_loss0_eval"])
    if relative0 > 1e-4:
        sys.exit(f"bench.sh twin: step-0 loss {twin['loss0_eval']:.7f} against hnas's {twin['hnas_loss0_eval']:.7f}: "
                 "not the same model")
    lines = [f"`{config}`, {steps} steps; step-0 loss (f32, dropout off): hnas {twin['hnas_loss0_eval']:.7f}, "
             f"PyTorch {twin['torch']} {twin['loss0_eval']:.7f} (relative {relative0:.1e}).", "",
             "| steps | hnas mean loss | PyTorch twin mean loss | hnas − twin | relative |", "| ---: | ---: | ---: | ---: | ---: |"]
    worst, previous = 0.0, 0
    for window in twin["losses"]:
        step = window["step"]
        if step in hnas:
            ours, theirs = hnas[step]["loss"], window["loss"]
            worst = max(worst, abs(ours - theirs) / abs(theirs))
            lines.append(f"| {previous + 1}–{step} | {ours:.4f} | {theirs:.4f} | {ours - theirs:+.4f} | "
                         f"{abs(ours - theirs) / abs(theirs):.1e} |")
            previous = step
    lines += ["", f"Largest relative difference of a 50-step mean: {worst:.1e}. hnas {hnas[steps]['elapsed_seconds']:.0f} s, "
              f"the twin {twin['seconds']:.0f} s on {twin['threads']} threads."]
    publish(os.path.join(out, "curves.md"), "\n".join(lines) + "\n")


def bench_data_run(fields, binary, log, *command):
    """bench.sh data's run of COMMAND as a JSON line: FIELDS, per rank the peaks of BINARY's processes, and its rates."""
    record, peaks, binary, start = json.loads(fields), {}, os.path.realpath(binary), time.time()
    process = subprocess.Popen(command, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    while process.poll() is None:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            with contextlib.suppress(OSError):  # gone, or not ours to read
                if os.readlink(f"/proc/{pid}/exe") == binary:
                    rank = int((re.findall(rb"OMPI_COMM_WORLD_RANK=(\d+)", open(f"/proc/{pid}/environ", "rb").read()) or [0])[0])
                    mib = [int(n) / 1024 for n in re.findall(r"(?m)^(?:VmHWM|RssAnon):\s+(\d+)", open(f"/proc/{pid}/status").read())]
                    peaks[rank] = [max(pair) for pair in zip(peaks.get(rank, mib), mib)]
        time.sleep(0.1)
    text, steps, warmup, ranks = open(log).read(), record["steps"], record["warmup"], sorted(peaks)
    record.update(status=process.returncode, seconds=time.time() - start, peak_rss_mib=[peaks[r][0] for r in ranks],
                  peak_anon_mib=[peaks[r][1] for r in ranks])
    for rate in re.findall(r"; [\d.]+ s, ([\d.]+) MB/s", text)[-1:]:  # hnas prepare's last line
        record.update(prepare_mb_s=float(rate), prepared_mb=sum(map(os.path.getsize, glob.glob(f"{record['dir']}/*"))) / 1e6)
    for day, second in re.findall(r"^\[([\d-]+ [\d:]+)(\.\d+)\] .* step +1/", text, re.M)[:1]:  # spdlog's local time
        elapsed = {r["step"]: r["elapsed_seconds"] for r in records(record["dir"]) if "elapsed_seconds" in r}
        record.update(first_step_s=time.mktime(time.strptime(day, "%Y-%m-%d %H:%M:%S")) + float(second) - start,
                      steps_per_s=(steps - warmup) / (elapsed[steps] - elapsed[warmup]) if steps in elapsed else None)
    print(json.dumps(record))


def bench_data(results):
    table("corpus GB | ranks | run | status | seconds | prepare MB/s | prepared MB | first step s | steps/s | peak RssAnon MiB | "
          "peak VmHWM MiB", "rrll" + "r" * 7)
    for r in jsonl(results):
        cells = [f"{r[k]:.{d}f}" if r.get(k) is not None else "–" for k, d in (("seconds", 1), ("prepare_mb_s", 1), ("prepared_mb", 0),
                                                                              ("first_step_s", 2), ("steps_per_s", 2))]
        cells += [" / ".join(f"{v:.0f}" for v in r[k]) or "–" for k in ("peak_anon_mib", "peak_rss_mib")]
        print(f"| {r['bytes'] / 1e9:.3f} | {r['ranks']} | {r['run']} | {r['status'] or 'ok'} | " + " | ".join(cells) + " |")


def bench_regions(short, long, steps):
    """The timed steps' share of two runs of scripts/openmp_regions.c (the longer minus the shorter), per step."""
    a, b, steps = json.load(open(short)), json.load(open(long)), int(steps)
    per_step = lambda key, scale=1.0: (b[key] - a[key]) * scale / steps
    wall, inside = per_step("wall_seconds", 1e3), per_step("inside_seconds", 1e3)
    print(f"a step: {per_step('regions'):.0f} outermost parallel regions; {wall:.1f} ms from the first region's start to "
          f"the last one's end, {inside:.1f} inside the regions, {wall - inside:.1f} outside ({100 * (wall - inside) / wall:.1f} %)")
    print(f"  products executed outside a region: {per_step('products'):.0f} a step, {per_step('product_seconds', 1e3):.1f} ms; "
          f"on one thread (no region opened): {per_step('serial_products'):.0f}, {per_step('serial_product_seconds', 1e3):.1f} ms")
    for shape, (count, seconds) in sorted(b["serial_shapes"].items(), key=lambda kv: -kv[1][1]):
        before = a["serial_shapes"].get(shape, [0, 0.0])
        if count > before[0]:
            print(f"    {shape}: {(count - before[0]) / steps:.1f} a step, {(seconds - before[1]) * 1e3 / steps:.2f} ms")


def bench(args):
    globals()["bench_" + args.mode.replace("-", "_")](*args.args)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    parsers = {name: commands.add_parser(name) for name in ("sweep", "finetune", "recipe", "pretrain", "decoding", "bench")}
    for name in ("sweep", "finetune", "recipe", "decoding"):
        parsers[name].add_argument("out")
    command = parsers["sweep"]
    command.add_argument("--metrics", default="accuracy", help="comma-separated test metrics (default accuracy)")
    command.add_argument("--pair", action="append", help="a:b, a difference a − b to test; repeated (default: by cell)")
    parsers["finetune"].add_argument("tasks", nargs="+")
    command = parsers["recipe"]
    command.add_argument("init", choices=("bert", "random", "hfbert"))
    command.add_argument("seed")
    command.add_argument("kinds", nargs="+")
    command = parsers["pretrain"]
    command.add_argument("paths", nargs="+", help="run directories or directories of runs")
    command.add_argument("--out", help="where the table and the plots go (default: the first path)")
    command.add_argument("--minutes", default="10,20,30,60", help="comma-separated minutes to read the curves at")
    command.add_argument("--u-trajectory", action="store_true", help="also hnas's u per layer at every validation")
    parsers["bench"].add_argument("mode")
    parsers["bench"].add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    globals()[args.command](args)


if __name__ == "__main__":
    main()
