#!/usr/bin/env python3
"""One config over settings × seeds with `hnas sweep`, each setting's learning rate optionally chosen on
validation first, then the comparison (OUT/comparison.md), the report (OUT/report.html) and, when Chromium is
installed, its screenshot (OUT/report.png); the README's command table tells more. Rerunning continues an
interrupted sweep.

    scripts/sweep.py CONFIG [LIST] [--kinds K1,K2,…] [--grid k=[v,…] …] [--set k=v …] [--out OUT]
                     [--seeds N] [--first-seed K] [--parallel P] [--rates '[r1,r2,…]'] [--prediction FILE]
    scripts/sweep.py --report DIR          # only the report and its screenshot, of a sweep or a run
    scripts/sweep.py --choose PILOT OUT    # only the choice of rates on a finished pilot sweep

LIST's named settings (configs/sweeps/*.json) run at every point of the grids; --kinds is the grid of the
encoder's self-attention kind. N defaults to 6 (with 5 the exact paired permutation test cannot reach
p < 0.05); OUT to runs/<config>_<list>, or runs/sweep_<config>_kinds with --kinds and no list. --rates: a
pilot sweep (OUT/pilot, one seed), each setting's rate of the best validation metric ("loss" lower, every
other metric higher, a tie to the larger rate) in OUT/learning_rates.md and OUT/settings.json, then every
setting at its rate in OUT/final. Runs $HNAS, by default build/hnas after scripts/setup.sh.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RATE = "train.learning_rate"
KIND = "model.attention.encoder.kind"


def hnas():
    """The hnas binary: $HNAS as it is, or build/hnas after the set-up builds it."""
    if os.environ.get("HNAS"):
        return os.environ["HNAS"]
    subprocess.run([os.path.join(ROOT, "scripts", "setup.sh")], check=True)
    return os.path.join(ROOT, "build", "hnas")


def write_atomically(path, text):
    with open(path + ".part", "w") as f:
        f.write(text)
    os.replace(path + ".part", path)


def choose_rates(pilot, out):
    """Per setting of a pilot sweep, the rate of its best validation metric: OUT/settings.json (an
    `hnas sweep --list` file) and OUT/learning_rates.md. Returns the list file's path."""
    sweep = json.load(open(os.path.join(pilot, "sweep.json")))
    seed = sweep["seeds"][0]
    groups = {}  # the other overrides → (name, overrides, [(metric, rate)])
    lower_better = None
    for setting in sweep["settings"]:
        overrides = dict(setting["overrides"])
        if RATE not in overrides:
            sys.exit(f"sweep: pilot setting {setting['name']} of {pilot} sets no {RATE}")
        rate = overrides.pop(RATE)
        # The name without the rate grid's part, which hnas sweep appends last, as a list file's name may be
        # (letters, digits, '.', '-', '+', '_': a --kinds pilot's kind=lnas becomes kind_lnas).
        name = re.sub(r"[^A-Za-z0-9.+_-]", "_", re.sub(r"(^|,)learning_rate=[^,]*$", "", setting["name"])) or "base"
        run = os.path.join(pilot, setting["name"], f"seed-{seed}")
        if not os.path.exists(os.path.join(run, "result.json")):
            sys.exit(f"sweep: {run} has no result.json; finish the pilot sweep first")
        metric = json.load(open(os.path.join(run, "result.json")))["training"].get("best_validation_metric")
        if metric is None:
            sys.exit(f"sweep: {run} never validated (set validation.every)")
        if lower_better is None:  # as the trainer's validate(): "loss" is better lower, every other metric higher
            lower_better = json.load(open(os.path.join(run, "config.json")))["validation"]["metric"] == "loss"
        groups.setdefault(json.dumps(overrides, sort_keys=True), (name, overrides, []))[2].append((metric, rate))
    chosen, lines = [], []
    for name, overrides, tried in groups.values():
        best = min(tried, key=lambda t: (t[0], -t[1])) if lower_better else max(tried)
        tried.sort(key=lambda t: t[1])
        lines.append(f"| {name} | " + ", ".join(f"{rate:g}: {metric:.4g}" for metric, rate in tried) + f" | {best[1]:g} |")
        chosen.append({"name": name, "set": {**overrides, RATE: best[1]}})
    os.makedirs(out, exist_ok=True)
    write_atomically(os.path.join(out, "settings.json"), json.dumps(chosen, indent=1) + "\n")
    table = (f"| setting | best validation metric per learning rate (seed {seed}; {'lower' if lower_better else 'higher'} "
             "is better) | chosen |\n|---|---|---|\n" + "\n".join(lines) + "\n")
    write_atomically(os.path.join(out, "learning_rates.md"), table)
    print(table, end="")
    return os.path.join(out, "settings.json")


def report(binary, folder):
    """hnas report's page of FOLDER and, when Chromium is installed, its screenshot."""
    subprocess.run([binary, "report", folder], check=True)
    if shutil.which("chromium"):
        page = os.path.join(folder, "report.html")
        subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--window-size=1200,6400", f"--screenshot={folder}/report.png", "file://" + os.path.realpath(page)],
                       check=True, stderr=subprocess.DEVNULL)
        print(f"wrote {folder}/report.png")


def main():
    parts = __doc__.split("\n\n", 2)
    parser = argparse.ArgumentParser(description=parts[0], usage=parts[1], epilog=parts[2],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", nargs="?")
    parser.add_argument("list", nargs="?")
    parser.add_argument("--kinds", help="comma-separated encoder self-attention kinds, a grid of their own")
    parser.add_argument("--grid", action="append", default=[])
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--out")
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--first-seed", type=int, default=1, help="the seed of each setting's first trial (the pilot's is 1)")
    parser.add_argument("--rates", help="'[r1,r2,…]': choose each setting's learning rate on validation first")
    parser.add_argument("--prediction")
    parser.add_argument("--report", metavar="DIR", help="only write DIR's report (a sweep or a run) and its screenshot")
    parser.add_argument("--choose", nargs=2, metavar=("PILOT", "OUT"), help="only choose the rates of a pilot sweep")
    args = parser.parse_args()
    if args.choose:
        choose_rates(*args.choose)
        return
    if args.report:
        report(os.environ.get("HNAS") or os.path.join(ROOT, "build", "hnas"), args.report)
        return
    if not args.config or not (args.list or args.kinds or args.grid):
        parser.error("give CONFIG and the settings: LIST, --kinds or --grid")
    os.chdir(ROOT)
    config = os.path.splitext(os.path.basename(args.config))[0]
    out = args.out or (f"runs/{config}_{os.path.splitext(os.path.basename(args.list))[0]}" if args.list
                       else f"runs/sweep_{config}_kinds" if args.kinds else f"runs/sweep_{config}")
    grids = [item for grid in args.grid for item in ("--grid", grid)]
    if args.kinds:
        grids += ["--grid", f"{KIND}=[{args.kinds}]"]
    common = [item for setting in args.set for item in ("--set", setting)] + ["--parallel", str(args.parallel)]
    settings = ["--list", args.list] if args.list else []
    binary = hnas()
    start = time.time()
    if args.rates:
        subprocess.run([binary, "sweep", "--config", args.config, *settings, *grids, "--grid", f"{RATE}={args.rates}",
                        "--seeds", "1", "--out", f"{out}/pilot", *common], check=True)
        print(f"pilot wall time: {time.time() - start:.0f} s")
        settings, grids = ["--list", choose_rates(f"{out}/pilot", out)], []  # the grid points are settings now
        out = f"{out}/final"
    prediction = ["--prediction", args.prediction] if args.prediction else []
    subprocess.run([binary, "sweep", "--config", args.config, *settings, *grids, "--seeds", str(args.seeds),
                    "--first-seed", str(args.first_seed), "--out", out, *prediction, *common], check=True)
    print(f"sweep wall time: {time.time() - start:.0f} s")
    report(binary, out)


if __name__ == "__main__":
    try:
        main()
    except subprocess.CalledProcessError as error:  # hnas said why; its status (130, 143: stopped by a signal) is ours
        sys.exit(error.returncode)
