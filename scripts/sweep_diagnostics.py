"""What a sweep's runs show about the mechanism, per setting: test metrics (mean ± s.e. over seeds), the
explaining-away statistics of every attention at each run's last validation (paper 004 Definition 1:
the share of real keys whose weight sum is below ε, the smallest sum × L_k), HNAS's u there, and the
paired tests between settings: those --pair names (a:b for a − b, repeated), or else by kind, with
settings named KIND_CELL (for example LNAS_recall0.25_alpha4) and each non-first kind of a cell paired
with the cell's first kind in the sweep's order. Reads OUT/sweep.json, OUT/comparison.json and each
run's result.json and metrics.jsonl; writes OUT/diagnostics.md and prints it.
    python3 scripts/sweep_diagnostics.py OUT [--metrics accuracy,accuracy_count] [--pair a:b …]
"""
import argparse
import json
import math
import os
import statistics


def percent(metric):
    """Points per unit of a metric as result.json holds it: ROUGE is in %, accuracies are fractions."""
    return 1.0 if metric.startswith("rouge") else 100.0


def mean_se(values, scale=1.0, digits=1):
    values = [scale * v for v in values]
    if len(values) < 2:
        return f"{values[0]:.{digits}f} (one seed)" if values else "–"
    se = statistics.stdev(values) / math.sqrt(len(values))
    return f"{statistics.mean(values):.{digits}f} ± {se:.{digits}f}"


def last_validation(run):
    last = None
    with open(os.path.join(run, "metrics.jsonl")) as f:
        for line in f:
            record = json.loads(line)
            if "diagnostics" in record:
                last = record
    if last is None:
        raise SystemExit(f"sweep_diagnostics: {run}/metrics.jsonl has no validation with diagnostics")
    return last


def metric_of(result, metric, run):
    if metric not in result:
        raise SystemExit(f"sweep_diagnostics: {run}/result.json has no test metric '{metric}' "
                         f"(it has {', '.join(sorted(result))}); choose with --metrics")
    return result[metric]


def pairs_by_cell(names):
    """Each non-first kind of a cell (KIND_CELL) against the cell's first kind in the sweep's order."""
    cells = {}
    for name in names:
        cells.setdefault(name.partition("_")[2], []).append(name)
    return [(other, members[0]) for members in cells.values() for other in members[1:]]


def named_pairs(items, names):
    """--pair a:b … as [(a, b), …], each name one of the sweep's settings."""
    pairs = []
    for item in items:
        a, sep, b = item.rpartition(":")
        for name in (a, b):
            if not sep or name not in names:
                raise SystemExit(f"sweep_diagnostics: --pair '{item}' is not a:b with a and b among the "
                                 f"sweep's settings ({', '.join(names)})")
        pairs.append((a, b))
    return pairs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--metrics", default="accuracy", help="comma-separated test metrics (default accuracy)")
    parser.add_argument("--pair", action="append", help="a:b, a difference a − b to test; repeated (default: by cell)")
    args = parser.parse_args()
    metrics = args.metrics.split(",")
    sweep = json.load(open(os.path.join(args.out, "sweep.json")))
    comparison = json.load(open(os.path.join(args.out, "comparison.json")))
    names = [s["name"] for s in sweep["settings"]]
    seeds = sweep["seeds"]
    tested = named_pairs(args.pair, names) if args.pair else pairs_by_cell(names)

    lines = []
    if sweep.get("prediction"):
        lines += [f"Prediction, stated before the runs: {sweep['prediction']}", ""]
    header = ["setting", "seeds"] + [f"test {m} %" for m in metrics] + [
        "attention", "keys below ε %", "keys below ε in every head %", "smallest sum × L_k (mean; min)", "u at the end"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    measured = None  # one run's diagnostics: ε and the validation's sequences, the same in every run
    for name in names:
        runs = [os.path.join(args.out, name, f"seed-{s}") for s in seeds]
        runs = [r for r in runs if os.path.exists(os.path.join(r, "result.json"))]
        if not runs:
            continue
        results = [json.load(open(os.path.join(r, "result.json")))["metrics"] for r in runs]
        validations = [last_validation(r)["diagnostics"] for r in runs]
        measured = validations[0]
        cells = [name, str(len(runs))] + [mean_se([metric_of(r, m, runs[0]) for r in results], percent(m)) for m in metrics]
        for i, attention in enumerate(validations[0]["attentions"]):
            stats = [v["attentions"][attention] for v in validations]
            below = [100 * statistics.mean(s["fraction_below_epsilon"]) for s in stats]
            ratios = [min(s["min_ratio"]) for s in stats]
            # Runs before hnas recorded it have no every-head share.
            every_head = [100 * s["fraction_below_epsilon_in_every_head"] for s in stats
                          if "fraction_below_epsilon_in_every_head" in s]
            u = [v["hybrid_u_mean"][attention] for v in validations if attention in v["hybrid_u_mean"]]
            row = cells if i == 0 else [""] * len(cells)
            lines.append("| " + " | ".join(row + [attention, mean_se(below, digits=2),
                                                   mean_se(every_head, digits=2) if len(every_head) == len(stats) else "–",
                                                   f"{statistics.mean(ratios):.3f}; {min(ratios):.3f}",
                                                   mean_se(u, digits=3) if u else "–"]) + " |")
    if measured is None:
        raise SystemExit(f"sweep_diagnostics: no run in {args.out} has a result.json yet")
    lines += ["", f"ε = {measured['epsilon']}; the statistics are those of each run's last validation "
              f"({measured['sequences']} sequences), the smallest sum over its keys times their count L_k.", ""]

    pairs = {(p["a"], p["b"], p["metric"]): p for p in comparison["pairs"]}
    lines += ["| a − b | metric | seeds | mean difference (points) | p (permutation over seeds) | p (bootstrap over test examples) |",
              "|---|---|---|---|---|---|"]
    for a, b in tested:
        for metric in metrics:
            pair, sign = pairs.get((a, b, metric)), 1
            if pair is None:
                pair, sign = pairs.get((b, a, metric)), -1
            if pair is None:
                continue
            boot = pair.get("bootstrap")
            lines.append(f"| {a} − {b} | {metric} | {len(pair['seeds'])} | "
                         f"{sign * percent(metric) * pair['mean_difference']:+.2f} | {pair['permutation']['p_value']:.3g} | "
                         + (f"{boot['p_value']:.3g} |" if boot else "– (no per-example scores) |"))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "diagnostics.md.part"), "w") as f:
        f.write(text)
    os.replace(os.path.join(args.out, "diagnostics.md.part"), os.path.join(args.out, "diagnostics.md"))
    print(text, end="")


if __name__ == "__main__":
    main()
