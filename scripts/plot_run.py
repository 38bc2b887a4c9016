#!/usr/bin/python3
"""Plot an hnas run directory: training curves, hybrid weights, throughput.

Reads RUN_DIR/metrics.jsonl (written by `hnas train`, src/train/trainer.cpp)
and writes PNG files into RUN_DIR/plots/ (or --out DIR):

    loss.png        training loss per logged step; validation loss (markers)
                    on the same axes; validation ROUGE-L x100 on a twin axis
                    when present (headline runs); learning rate in a small
                    panel below
    hybrid_u.png    only when some attention layer is hnas: one subplot per
                    attention layer, the hybrid weight u of every head over
                    the training steps (y from 0 to 1)
    throughput.png  input tokens (the tokens the model reads) per second per
                    logged step

metrics.jsonl holds one JSON object per line, of two kinds:

    progress    {"step", "epoch", "loss", "learning_rate", "grad_norm",
                 "input_tokens_per_second", "targets_per_second", "target_unit",
                 "elapsed_seconds",
                 "hybrid_u": {"<layer name>": [u_head0, u_head1, ...], ...}}
    validation  {"step", "validation_loss", "validation_perplexity",
                 "validation_rouge_l" (headline runs only), "best_metric"}

A resumed run appends to the same file and re-logs the steps after its last
checkpoint, so a step can occur more than once: the LAST record of each kind
per step is kept.

Requirements: Debian's matplotlib (`apt-get install -y python3-matplotlib`),
run with Debian's interpreter /usr/bin/python3 (the `python3` first on PATH
may be a pyenv interpreter that does not see Debian packages).  Otherwise the
Python 3 standard library only.  The non-interactive Agg backend is used, so
no display is needed.

Usage:
    /usr/bin/python3 scripts/plot_run.py RUN_DIR [--out DIR] [--dpi N] [--title TEXT]
"""

import argparse
import json
import math
import os
import re
import sys


class PlotError(Exception):
    """An input problem reported to the user without a traceback."""


def _number(value):
    """value as a float, or None when it is missing, null or not finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def read_metrics(path):
    """Return (progress, validation): lists of records sorted by step, last record per step kept."""
    progress, validation = {}, {}
    nonblank = 0
    with open(path, encoding="utf-8") as stream:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            nonblank += 1
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                # A run killed mid-write (kill -9 is a supported way to stop hnas) can leave its last
                # line cut short, without its newline: skip that one line, and only that one.
                if not line.endswith("\n"):
                    print(f"{where}: skipping the unterminated last line (the run was stopped mid-write)",
                          file=sys.stderr)
                    continue
                raise PlotError(f"{where}: malformed line (not valid JSON: {error.msg} at column {error.colno})")
            if not isinstance(record, dict):
                raise PlotError(f"{where}: malformed line (expected a JSON object, got {type(record).__name__})")
            step = record.get("step")
            if isinstance(step, bool) or not isinstance(step, int):
                raise PlotError(f"{where}: malformed line (no integer \"step\")")
            if "validation_loss" in record:
                validation[step] = record
            elif "loss" in record:
                hybrid = record.get("hybrid_u", {})
                if hybrid is None:
                    hybrid = {}
                if not isinstance(hybrid, dict) or not all(isinstance(v, list) for v in hybrid.values()):
                    raise PlotError(f"{where}: malformed line (\"hybrid_u\" must map layer names to lists)")
                progress[step] = record
            else:
                raise PlotError(f"{where}: malformed line (neither a progress record with \"loss\" "
                                f"nor a validation record with \"validation_loss\")")
    if nonblank == 0:
        raise PlotError(f"{path} is empty: no records to plot")
    return ([progress[s] for s in sorted(progress)], [validation[s] for s in sorted(validation)])


def series(records, key, scale=1.0):
    """(steps, values) for the records where key holds a finite number."""
    steps, values = [], []
    for record in records:
        value = _number(record.get(key))
        if value is not None:
            steps.append(record["step"])
            values.append(value * scale)
    return steps, values


def layer_sort_key(name):
    """Encoder before decoder, natural order (layers.2 before layers.10), self_attn before cross_attn."""
    group = 0 if name.startswith("encoder") else 1 if name.startswith("decoder") else 2
    name = name.replace("self_attn", "0self_attn")
    parts = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", name) if p)
    return (group, parts)


def hybrid_series(progress):
    """{layer: (steps, [[u of head h at each step] for h])}; heads absent at a step are NaN gaps."""
    layers = {}
    for record in progress:
        for name, values in (record.get("hybrid_u") or {}).items():
            layers.setdefault(name, []).append((record["step"], values))
    result = {}
    for name in sorted(layers, key=layer_sort_key):
        points = layers[name]
        heads = max(len(values) for _, values in points)
        steps = [step for step, _ in points]
        per_head = []
        for h in range(heads):
            column = []
            for _, values in points:
                value = _number(values[h]) if h < len(values) else None
                column.append(math.nan if value is None else value)
            per_head.append(column)
        result[name] = (steps, per_head)
    return result


def short_layer_name(name):
    """encoder.layers.0.self_attn -> enc 0 self_attn (keeps the full name when it does not match)."""
    match = re.fullmatch(r"(encoder|decoder)\.layers\.(\d+)\.(\w+)", name)
    if not match:
        return name
    return f"{match.group(1)} layer {match.group(2)} · {match.group(3)}"


def plot_loss(plt, progress, validation, title, path, dpi):
    figure, (ax, ax_lr) = plt.subplots(2, 1, sharex=True, figsize=(9, 6.2), gridspec_kw={"height_ratios": [3, 1]})
    handles = []
    steps, loss = series(progress, "loss")
    if steps:
        handles += ax.plot(steps, loss, color="tab:blue", linewidth=1.2, label="training loss")
    steps, vloss = series(validation, "validation_loss")
    if steps:
        handles += ax.plot(steps, vloss, color="tab:orange", marker="o", markersize=4, linewidth=1.0,
                           label="validation loss")
    ax.set_ylabel("loss (cross-entropy)")
    ax.grid(True, alpha=0.3)
    steps, rouge = series(validation, "validation_rouge_l", scale=100.0)
    if steps:
        ax_rouge = ax.twinx()
        handles += ax_rouge.plot(steps, rouge, color="tab:green", marker="s", markersize=4, linewidth=1.0,
                                 linestyle="--", label="validation ROUGE-L ×100")
        ax_rouge.set_ylabel("ROUGE-L ×100", color="tab:green")
        ax_rouge.tick_params(axis="y", colors="tab:green")
        low, high = min(rouge), max(rouge)
        span = max(high - low, 1.0)  # keeps a flat curve (e.g. all zeros early on) off the axes' edges
        ax_rouge.set_ylim(low - 0.06 * span, low + 1.06 * span)
    if handles:
        # Above the axes: curves on two y scales leave no corner that is reliably free.
        ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(handles),
                  fontsize="small", frameon=False)
    figure.suptitle(title)

    steps, lr = series(progress, "learning_rate")
    if steps:
        ax_lr.plot(steps, lr, color="tab:purple", linewidth=1.2)
    ax_lr.set_ylabel("learning rate")
    ax_lr.set_xlabel("step")
    ax_lr.grid(True, alpha=0.3)
    ax_lr.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
    figure.tight_layout()
    figure.savefig(path, dpi=dpi)
    plt.close(figure)


def plot_hybrid(plt, hybrid, title, path, dpi):
    names = list(hybrid)
    count = len(names)
    columns = min(count, 3 if count <= 9 else 4)
    rows = math.ceil(count / columns)
    figure, axes = plt.subplots(rows, columns, sharex=True, sharey=True, squeeze=False,
                                figsize=(4.2 * columns + 0.4, 3.0 * rows + 0.5))
    max_heads = max(len(per_head) for _, per_head in hybrid.values())
    colormap = plt.get_cmap("tab10" if max_heads <= 10 else "tab20")
    colors = [colormap(h % colormap.N) for h in range(max_heads)]
    for index, name in enumerate(names):
        ax = axes[index // columns][index % columns]
        steps, per_head = hybrid[name]
        marker = "o" if len(steps) <= 30 else None
        for h, values in enumerate(per_head):
            ax.plot(steps, values, color=colors[h], linewidth=1.1, marker=marker, markersize=2.5, label=f"h{h}")
        ax.set_title(short_layer_name(name), fontsize="medium")
        ax.set_ylim(0.0, 1.0)
        ax.grid(True, alpha=0.3)
    for index in range(count, rows * columns):
        axes[index // columns][index % columns].set_visible(False)
    for row in range(rows):
        axes[row][0].set_ylabel("hybrid weight u")
    for column in range(columns):
        # The lowest visible subplot in each column carries the x label.
        bottom = max(r for r in range(rows) if r * columns + column < count) if column < count else None
        if bottom is not None:
            axes[bottom][column].set_xlabel("step")
            axes[bottom][column].xaxis.set_tick_params(labelbottom=True)
    figure.suptitle(f"{title}: hybrid weight u per layer and head")
    figure.tight_layout()
    # One compact legend for the whole figure (head colours are the same in every subplot), hung
    # below the grid; bbox_inches="tight" grows the image to include it.
    head_handles = [plt.Line2D([], [], color=colors[h], linewidth=2) for h in range(max_heads)]
    figure.legend(head_handles, [f"h{h}" for h in range(max_heads)], loc="upper center", bbox_to_anchor=(0.5, 0.0),
                  ncol=min(max_heads, 16), fontsize="small", frameon=False, handlelength=1.5, columnspacing=1.0,
                  title="head", title_fontsize="small")
    figure.savefig(path, dpi=dpi, bbox_inches="tight", pad_inches=0.1)
    plt.close(figure)


def plot_throughput(plt, progress, title, path, dpi):
    figure, ax = plt.subplots(figsize=(9, 3.8))
    # Runs before input and target throughputs were told apart logged the loss's targets (headline:
    # target tokens) as "tokens_per_second".
    new = any("input_tokens_per_second" in record for record in progress)
    key, unit = ("input_tokens_per_second", "input tokens/s") if new else ("tokens_per_second", "target tokens/s")
    steps, rate = series(progress, key)
    ax.plot(steps, rate, color="tab:blue", linewidth=1.0, marker="o" if len(steps) <= 30 else None, markersize=3,
            label=unit)
    if rate:
        mean = sum(rate) / len(rate)
        ax.axhline(mean, color="tab:gray", linestyle="--", linewidth=1.0, label=f"mean {mean:,.0f} {unit}")
        ax.legend(loc="best", fontsize="small", framealpha=0.85)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("step")
    ax.set_ylabel("training tokens / second")
    ax.set_title(f"{title}: throughput")
    ax.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=dpi)
    plt.close(figure)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Plot an hnas run directory (RUN_DIR/metrics.jsonl) into PNG files.",
        epilog="Run with Debian's /usr/bin/python3 and python3-matplotlib installed.")
    parser.add_argument("run_dir", metavar="RUN_DIR", help="run directory of `hnas train` (holds metrics.jsonl)")
    parser.add_argument("--out", metavar="DIR", help="output directory (default: RUN_DIR/plots)")
    parser.add_argument("--dpi", type=int, default=120, help="resolution of the PNG files (default: 120)")
    parser.add_argument("--title", help="title of the plots (default: the run directory's name)")
    args = parser.parse_args(argv)
    if args.dpi <= 0:
        parser.error("--dpi must be positive")
    return args


def main(argv=None):
    args = parse_args(argv)
    run_dir = args.run_dir
    if not os.path.isdir(run_dir):
        raise PlotError(f"run directory {run_dir} does not exist or is not a directory")
    metrics_path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(metrics_path):
        raise PlotError(f"{metrics_path} not found: is {run_dir} an hnas run directory (has training started)?")
    progress, validation = read_metrics(metrics_path)
    title = args.title or os.path.basename(os.path.normpath(os.path.abspath(run_dir)))
    out_dir = args.out or os.path.join(run_dir, "plots")

    try:
        import matplotlib
    except ImportError:
        raise PlotError("matplotlib is missing: apt-get install -y python3-matplotlib, "
                        "and run this script with /usr/bin/python3")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    written = []
    path = os.path.join(out_dir, "loss.png")
    plot_loss(plt, progress, validation, title, path, args.dpi)
    written.append(path)
    hybrid = hybrid_series(progress)
    if hybrid:
        path = os.path.join(out_dir, "hybrid_u.png")
        plot_hybrid(plt, hybrid, title, path, args.dpi)
        written.append(path)
    if progress:
        path = os.path.join(out_dir, "throughput.png")
        plot_throughput(plt, progress, title, path, args.dpi)
        written.append(path)
    else:
        print(f"note: no progress records in {metrics_path}; throughput.png not written", file=sys.stderr)
    print(f"{len(progress)} progress and {len(validation)} validation records (last per step) from {metrics_path}")
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except PlotError as error:
        print(f"plot_run.py: error: {error}", file=sys.stderr)
        sys.exit(1)
    except OSError as error:
        print(f"plot_run.py: error: {error}", file=sys.stderr)
        sys.exit(1)
