#!/usr/bin/python3
"""Plots of the analyses (docs/analyses.md, made by scripts/recipe.sh analyses) from the JSON that hnas
writes, one PNG each:

    /usr/bin/python3 scripts/plot_analysis.py toy|centre-distance|explain-away|hybrid RESULT.json --out PLOT.png

toy: `hnas toy mode-collapse` (paper 004 Fig. 6); centre-distance: `hnas toy centre-distance` (paper 000
Eq. 11-12, Fig. 2); explain-away: `hnas analyze explain-away`; hybrid: `hnas analyze hybrid`. Needs
Debian's python3-matplotlib, so Debian's /usr/bin/python3 (a pyenv python3 first on PATH does not see
Debian's packages); the Agg backend needs no display.
"""

import argparse
import json
import math
import sys


class PlotError(Exception):
    """An input problem reported to the user without a traceback."""


KIND_COLOURS = {"lnas": "tab:blue", "dnas": "tab:red", "hnas": "tab:purple"}
# Paper 004 Fig. 6 draws the large cluster red and the small one blue.
GAUSSIAN_COLOURS = ("tab:red", "tab:blue")


def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise PlotError(f"cannot read {path}: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise PlotError(f"{path} is not valid JSON: {e}") from e


def field(record, key, where):
    """record[key], or a PlotError naming the missing key and where it was expected."""
    if not isinstance(record, dict) or key not in record:
        raise PlotError(f"{where}: missing '{key}'")
    return record[key]


def pyplot():
    try:
        import matplotlib
    except ImportError as e:
        raise PlotError("matplotlib is missing: apt-get install -y python3-matplotlib, "
                        "and run with /usr/bin/python3") from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save(fig, out):
    fig.tight_layout()
    fig.savefig(out, dpi=110, bbox_inches="tight")
    print(f"wrote {out}")


def plot_toy(data, out):
    if data.get("analysis") != "mode_collapse":
        raise PlotError("toy: expected the JSON of `hnas toy mode-collapse --output`")
    options = field(data, "options", "toy")
    n0 = field(options, "n0", "toy options")
    runs = field(data, "runs", "toy")
    if not runs:
        raise PlotError("toy: no runs")
    steps = len(field(runs[0], "steps", "toy run 0"))
    plt = pyplot()
    fig, axes = plt.subplots(len(runs), steps + 1, figsize=(2.7 * (steps + 1), 2.8 * len(runs)), squeeze=False)
    all_points = [p for run in runs for step in run["steps"] for p in step["points"]]
    xs = [p[0] for p in all_points]
    ys = [p[1] for p in all_points]
    pad = 0.1 * max(max(xs) - min(xs), max(ys) - min(ys), 1e-9)
    limits = ((min(xs) - pad, max(xs) + pad), (min(ys) - pad, max(ys) + pad))
    for row, run in enumerate(runs):
        kind = field(run, "kind", f"toy run {row}")
        for column, step in enumerate(run["steps"]):
            ax = axes[row][column]
            points = field(step, "points", f"toy {kind} step {column}")
            # The small cluster last, so it is not hidden under the large one.
            for group, members in ((0, points[:n0]), (1, points[n0:])):
                ax.scatter([p[0] for p in members], [p[1] for p in members], s=6, alpha=0.6,
                           color=GAUSSIAN_COLOURS[group], label=f"Gaussian {group} ({len(members)})")
            ax.set(xlim=limits[0], ylim=limits[1])
            ax.set_aspect("equal", adjustable="box")
            stray = step.get("stray_points", 0)
            ax.set_title(f"{kind}, step {step['step']}: {step['clusters']} cluster{'s' if step['clusters'] != 1 else ''}"
                         + (f" +{stray} stray" if stray else ""), fontsize=9)
            ax.tick_params(labelsize=7)
            if column == 0:
                ax.set_ylabel("x2")
            if row == len(runs) - 1:
                ax.set_xlabel("x1")
        axes[row][0].legend(fontsize=7, loc="lower right", markerscale=2)
    distance_ax = axes[0][steps]
    for row in range(1, len(runs)):
        axes[row][steps].axis("off")
    for run in runs:
        kind = run["kind"]
        distance_ax.plot([s["step"] for s in run["steps"]], [s["centre_distance"] for s in run["steps"]], marker="o",
                         color=KIND_COLOURS.get(kind), label=kind)
    distance_ax.set(xlabel="step", ylabel="distance between centres", ylim=(0, None))
    distance_ax.set_title("centre distance per step", fontsize=9)
    distance_ax.grid(alpha=0.3)
    distance_ax.legend(fontsize=8)
    fig.suptitle(f"Mode collapse: {options['n0']} vs {options['n1']} points, spread {options['spread']}, "
                 f"score scale {options['score_scale']}, seed {options['seed']}")
    save(fig, out)


def plot_centre_distance(data, out):
    if data.get("analysis") != "centre_distance":
        raise PlotError("centre-distance: expected the JSON of `hnas toy centre-distance --output`")
    curves = field(data, "curves", "centre-distance")
    if not curves:
        raise PlotError("centre-distance: no curves")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 5))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, curve in enumerate(curves):
        colour = colours[index % len(colours)]
        a = field(curve, "a", f"curve {index}")
        ax.plot(curve["r"], curve["lnas"], color=colour, linestyle="-", label=f"a = {a:g}: LNAS (Eq. 11)")
        ax.plot(curve["r"], curve["dnas"], color=colour, linestyle="--", label=f"a = {a:g}: DNAS (Eq. 12)")
        simulated = curve.get("simulated", [])
        ax.scatter([p["r"] for p in simulated], [p["lnas"] for p in simulated], color=colour, marker="o",
                   facecolors="none", s=28, zorder=3)
        ax.scatter([p["r"] for p in simulated], [p["dnas"] for p in simulated], color=colour, marker="x", s=28, zorder=3)
        ax.axhline(2 * a, color=colour, linewidth=0.6, alpha=0.4)
    ax.scatter([], [], color="gray", marker="o", facecolors="none", label="1-D simulation, LNAS")
    ax.scatter([], [], color="gray", marker="x", label="1-D simulation, DNAS")
    ax.set(xscale="log", xlabel="r = N0 / N1", ylabel="centre distance after one step")
    error = data.get("max_abs_error")
    ax.set_title("Centre distance after one attention step (thin lines: initial 2a)"
                 + (f"\nlargest |simulation - Eq.| = {error:.2g}" if error is not None else ""), fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    save(fig, out)


def panels(plt, count, width, height):
    """A figure of `count` panels, at most 4 a row, the cells left over switched off: (figure, the panels)."""
    columns = min(count, 4)
    rows = math.ceil(count / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(width * columns, height * rows), squeeze=False)
    cells = [ax for row in axes for ax in row]
    for ax in cells[count:]:
        ax.axis("off")
    return fig, cells


def plot_explain_away(data, out):
    attentions = field(data, "attentions", "explain-away")
    heads = [(attention, head) for attention in attentions for head in field(attention, "heads", attention.get("name", "?"))]
    if not heads:
        raise PlotError("explain-away: no heads")
    epsilon = field(data, "epsilon", "explain-away")
    plt = pyplot()
    fig, axes = panels(plt, len(heads), 3.6, 2.9)
    for ax, (attention, head) in zip(axes, heads):
        where = f"{attention.get('name', '?')} head {head.get('head', '?')}"
        if "ln_histogram" in head:
            histogram = field(head, "ln_histogram", where)
            edges = list(field(histogram, "edges", where))
            below = histogram.get("below_range", 0)
        else:
            histogram = field(head, "log10_histogram", where)
            edges = [edge * math.log(10) for edge in field(histogram, "edges", where)]
            below = 0
        counts = field(histogram, "counts", where)
        if len(edges) != len(counts) + 1:
            raise PlotError(f"{where}: {len(edges)} histogram edges for {len(counts)} counts (need one more edge)")
        kind = attention.get("kind", "")
        colour = KIND_COLOURS.get(kind, "tab:gray")
        ax.stairs(counts, edges, fill=True, color=colour, alpha=0.7)
        if below:
            ax.bar(edges[0] - 2, below, width=2, color=colour, hatch="//", alpha=0.5, label=f"below e^{edges[0]:.0f}: {below}")
        ax.axvline(math.log(epsilon), color="black", linestyle="--", linewidth=1, label=f"ε = {epsilon:g}")
        bound = head.get("min_bound")
        if bound:
            ax.axvline(math.log(bound), color="tab:green", linestyle=":", linewidth=1.2, label=f"1/L of the min's sequence = {bound:.3g} (Lemma 1)")
        ax.set_title(f"{attention.get('name', '?')} ({kind}) head {head.get('head', '?')}\n"
                     f"below ε: {100 * head.get('fraction_below_epsilon', float('nan')):.2f} %, "
                     f"min {head.get('min_sum', float('nan')):.3g}", fontsize=8)
        ax.set_xlabel("ln(sum of a key's attention weights)", fontsize=8)
        ax.set_ylabel("keys", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7)
    fig.suptitle(f"Explaining away: {data.get('checkpoint', '?')} (step {data.get('step', '?')}, "
                 f"{data.get('sequences', '?')} sequences)")
    save(fig, out)


def plot_hybrid(data, out):
    points = sorted(field(data, "points", "hybrid"), key=lambda p: field(p, "step", "hybrid point"))
    if not points:
        raise PlotError("hybrid: no points")
    names = list(dict.fromkeys(field(attention, "name", f"hybrid step {point['step']}") for point in points
                               for attention in field(point, "attentions", f"hybrid step {point['step']}")))
    if not names:
        raise PlotError("hybrid: no attention has a u")
    plt = pyplot()
    fig, axes = panels(plt, len(names), 4, 3)
    for ax, name in zip(axes, names):
        series = [(point["step"], attention["u"]) for point in points for attention in point["attentions"]
                  if attention["name"] == name]
        heads = max(len(u) for _, u in series)
        if len(points) == 1:
            u = series[0][1]
            ax.bar(range(len(u)), u, color="tab:purple")
            ax.set(xlabel="head", xticks=range(len(u)))
        else:
            for head in range(heads):
                steps = [step for step, u in series if head < len(u)]
                ax.plot(steps, [u[head] for _, u in series if head < len(u)], label=f"head {head}")
            ax.set_xlabel("step")
            if heads <= 16:
                ax.legend(fontsize=6, ncol=2)
        ax.axhline(0.5, color="gray", linewidth=0.6, linestyle=":")
        ax.set(ylim=(0, 1), ylabel="u (1: DNAS, 0: LNAS)")
        ax.set_title(name, fontsize=9)
        ax.grid(alpha=0.3)
    fig.suptitle(f"Hybrid weight u per head: {data.get('source', '?')}"
                 + (f" (step {points[0]['step']})" if len(points) == 1 else ""))
    save(fig, out)


PLOTTERS = {"toy": plot_toy, "centre-distance": plot_centre_distance, "explain-away": plot_explain_away,
            "hybrid": plot_hybrid}


def main(argv):
    parser = argparse.ArgumentParser(description="Plot hnas analysis JSON as PNG.")
    subparsers = parser.add_subparsers(dest="analysis", required=True)
    for name in PLOTTERS:
        sub = subparsers.add_parser(name, help=f"plot the {name} analysis")
        sub.add_argument("json", help="the analysis JSON")
        sub.add_argument("--out", required=True, help="PNG to write")
    args = parser.parse_args(argv)
    try:
        PLOTTERS[args.analysis](load_json(args.json), args.out)
    except PlotError as e:
        print(f"plot_analysis.py: {e}", file=sys.stderr)
        return 1
    except (KeyError, TypeError, ValueError, IndexError) as e:
        print(f"plot_analysis.py: malformed {args.analysis} JSON in {args.json}: {e!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
