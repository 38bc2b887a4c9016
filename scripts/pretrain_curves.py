#!/usr/bin/python3
"""Masked-token accuracy against minutes of training, for masked-LM runs (docs/pretraining.md).

    python3 scripts/pretrain_curves.py RUN_OR_SWEEP … [--out DIR] [--minutes 10,20,30,60] [--u-trajectory]

Each argument is a run directory (holding metrics.jsonl) or a directory of them at any depth (a sweep).
From each run's metrics.jsonl: the validation masked-token accuracy at every validation and the time to
that step (elapsed_seconds of the progress line of the same step: wall time since the run started,
validations included, a resumed run's lives chained). Prints a markdown table, one row per run: the
accuracy reached by each of --minutes (the last validation at or before it; "–" before the first, and
after the last while the run is still training; "†" marks a finished run's final accuracy past its end),
the last validation's accuracy, step and minutes, and the minutes per 1,000 steps; then
per encoder layer at each run's end, hnas's u and the explaining-away statistics of the layer's attention
weights (paper 000/004 Fig. 4; docs/analyses.md); with --u-trajectory, hnas's u per layer at every validation
(a table per run, and OUT/pretrain_u.png); writes OUT/pretrain_curves.md and, with Debian's python3-matplotlib, OUT/pretrain_curves.png (accuracy against
minutes, one line per run). The minutes are those of the machine and threads the runs had: compare runs
that ran alike (alone, the same thread count), as `hnas sweep --parallel 1` runs them.
"""
import argparse
import json
import os
import sys


def find_runs(paths):
    runs = []
    for path in paths:
        if not os.path.isdir(path):
            sys.exit(f"pretrain_curves: {path} is not a directory")
        for root, dirs, files in os.walk(path):
            dirs.sort()
            if "metrics.jsonl" in files:
                runs.append(root)
    if not runs:
        sys.exit(f"pretrain_curves: no metrics.jsonl under {' '.join(paths)}")
    return runs


def curve(run):
    """[(step, minutes, accuracy)] of a run's validations, the last record of a step winning. A resumed run
    re-logs the steps after its last checkpoint and counts its seconds from the resumption: they are added
    to the seconds the first life took to the step it resumed from."""
    elapsed, accuracy = {}, {}
    offset, previous = 0.0, -1.0
    with open(os.path.join(run, "metrics.jsonl")) as metrics:
        for number, line in enumerate(metrics, 1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                sys.exit(f"pretrain_curves: {run}/metrics.jsonl:{number}: not JSON ({error})")
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
        sys.exit(f"pretrain_curves: {run}: validations at steps {missing} have no progress line of the same "
                 "step (set train.log_every to divide validation.every)")
    return [(step, elapsed[step] / 60.0, accuracy[step]) for step in sorted(accuracy)]


def planned_steps(run):
    """train.steps of the run's resolved config (config.json), or None without one."""
    path = os.path.join(run, "config.json")
    if not os.path.exists(path):
        return None
    with open(path) as config:
        return json.load(config).get("train", {}).get("steps")


def layer_diagnostics(run):
    """Per encoder layer at the run's end: hnas's u (mean over heads, from the last progress line) and,
    from the last validation's diagnostics, the smallest per-key weight sum × L over heads (≥ 1 under
    DNAS; LNAS explains a key away as it nears 0) and the largest share of keys below ε."""
    last_u, last_diagnostics = {}, {}
    with open(os.path.join(run, "metrics.jsonl")) as metrics:
        for line in metrics:
            record = json.loads(line)
            if record.get("hybrid_u"):
                last_u = record["hybrid_u"]
            if "diagnostics" in record:
                last_diagnostics = record["diagnostics"]
    rows = {}
    for layer, attention in last_diagnostics.get("attentions", {}).items():
        rows[layer] = {"kind": attention["kind"], "min_ratio": min(attention["min_ratio"]),
                       "below": max(attention["fraction_below_epsilon"])}
    for layer, heads in last_u.items():
        rows.setdefault(layer, {})["u"] = sum(heads) / len(heads)
    return rows, last_diagnostics.get("epsilon")


def u_trajectory(run):
    """[(step, {layer: u mean over heads})] at each validation of an hnas run, from the validation's
    diagnostics (empty for runs without a hybrid); a step validated twice (a resumed run) keeps its last."""
    u_at = {}
    with open(os.path.join(run, "metrics.jsonl")) as metrics:
        for line in metrics:
            record = json.loads(line)
            u_mean = record.get("diagnostics", {}).get("hybrid_u_mean")
            if u_mean:
                u_at[record["step"]] = u_mean
    return sorted(u_at.items())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+", help="run directories or directories of runs")
    parser.add_argument("--out", default=None, help="where the table and the plot go (default: the first path)")
    parser.add_argument("--minutes", default="10,20,30,60", help="comma-separated minutes to read the curves at")
    parser.add_argument("--u-trajectory", action="store_true",
                        help="also hnas's u per layer at every validation (a table, and OUT/pretrain_u.png)")
    args = parser.parse_args()
    try:
        marks = [float(m) for m in args.minutes.split(",")]
    except ValueError:
        parser.error(f"--minutes {args.minutes}: expected comma-separated numbers")
    out = args.out or args.paths[0]
    os.makedirs(out, exist_ok=True)
    common = os.path.commonpath([os.path.abspath(p) for p in args.paths])
    def name_of(run):
        relative = os.path.relpath(os.path.abspath(run), common)
        return os.path.basename(os.path.abspath(run)) if relative == "." else relative

    runs = find_runs(args.paths)
    curves = {name_of(run): curve(run) for run in runs}
    runs_by_name = {name_of(run): run for run in runs}

    lines = ["| run | " + " | ".join(f"accuracy at {m:g} min" for m in marks) +
             " | last validation: accuracy, step, minutes | minutes per 1,000 steps |",
             "| --- | " + " | ".join("---:" for _ in marks) + " | ---: | ---: |"]
    for name, points in curves.items():
        if not points:
            lines.append(f"| {name} | " + " | ".join("–" for _ in marks) + " | no validation yet | – |")
            continue
        step, minutes, accuracy = points[-1]
        ended = step == planned_steps(runs_by_name[name])
        reached = []
        for mark in marks:  # "–" before the first validation, and after the last one of a run still training
            before = [value for _, at, value in points if at <= mark]
            if before and mark <= minutes:
                reached.append(f"{100 * before[-1]:.1f} %")
            elif before and ended:
                reached.append(f"{100 * before[-1]:.1f} % †")
            else:
                reached.append("–")
        lines.append(f"| {name} | " + " | ".join(reached) +
                     f" | {100 * accuracy:.1f} % at {step}, {minutes:.1f} | {1000 * minutes / step:.2f} |")
    lines += ["", "† the run had ended (its last validation at its last step): its final accuracy, reached earlier.",
              "", "Per encoder layer at the end of each run: hnas's u (mean over heads), the smallest per-key weight sum × L",
              "over heads (≥ 1 under DNAS), the largest share of keys below ε (the last validation's diagnostics):", "",
              "| run | layer | kind | u | smallest Σ_i A_ij × L | keys below ε |", "| --- | --- | --- | ---: | ---: | ---: |"]
    for run in runs:
        rows, epsilon = layer_diagnostics(run)
        for layer, row in rows.items():
            u = f"{row['u']:.3f}" if "u" in row else "–"
            ratio = f"{row['min_ratio']:.2f}" if "min_ratio" in row else "–"
            below = f"{100 * row['below']:.1f} % (ε {epsilon:g})" if "below" in row else "–"
            lines.append(f"| {name_of(run)} | {layer} | {row.get('kind', '–')} | {u} | {ratio} | {below} |")
    trajectories = {name_of(run): u_trajectory(run) for run in runs} if args.u_trajectory else {}
    for name, points in trajectories.items():
        if not points:
            continue
        layers = list(points[0][1])
        lines += ["", f"hnas's u per layer over pretraining, {name} (mean over heads, at each validation):", "",
                  "| step | " + " | ".join(layers) + " |", "| ---: | " + " | ".join("---:" for _ in layers) + " |"]
        lines += [f"| {step} | " + " | ".join(f"{u.get(layer, float('nan')):.3f}" for layer in layers) + " |" for step, u in points]
    table = "\n".join(lines) + "\n"
    with open(os.path.join(out, "pretrain_curves.md"), "w") as f:
        f.write(table)
    print(table, end="")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("pretrain_curves: no matplotlib (apt-get install python3-matplotlib): no plot", file=sys.stderr)
        return
    figure, axes = plt.subplots(figsize=(8, 5))
    for name, points in curves.items():
        if points:
            axes.plot([p[1] for p in points], [100 * p[2] for p in points], marker="o", markersize=3, label=name)
    axes.set_xlabel("minutes of training")
    axes.set_ylabel("validation masked-token accuracy (%)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(os.path.join(out, "pretrain_curves.png"), dpi=120)
    if any(trajectories.values()):
        figure, axes = plt.subplots(figsize=(8, 4))
        for name, points in trajectories.items():
            for layer in (points[0][1] if points else {}):
                axes.plot([step for step, _ in points], [u[layer] for _, u in points], marker="o", markersize=3,
                          label=f"{name} {layer.replace('encoder.layers.', 'layer ').replace('.self_attn', '')}")
        axes.set_xlabel("step")
        axes.set_ylabel("hnas u (mean over heads)")
        axes.set_ylim(0, 1)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
        figure.tight_layout()
        figure.savefig(os.path.join(out, "pretrain_u.png"), dpi=120)


if __name__ == "__main__":
    main()
