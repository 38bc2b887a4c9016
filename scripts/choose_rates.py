#!/usr/bin/env python3
"""Each setting's learning rate, chosen on validation from a pilot sweep (one seed per rate).

    python3 scripts/choose_rates.py PILOT OUT

PILOT is an `hnas sweep` folder whose settings are a list crossed with a grid of train.learning_rate
(`--list L --grid 'train.learning_rate=[…]' --seeds 1`). Per setting of the list, the rate whose run
logged the best validation metric (the runs' validation.metric; loss and perplexity lower, every other
metric higher) is chosen; a tie goes to the larger rate. Writes OUT/settings.json (an `hnas sweep --list` file: the settings with their
chosen rates) and OUT/learning_rates.md (every rate's validation metric and the choice). The test split
plays no part in the choice.
"""
import json
import os
import sys

RATE = "train.learning_rate"


def main():
    pilot, out = sys.argv[1], sys.argv[2]
    sweep = json.load(open(os.path.join(pilot, "sweep.json")))
    seed = sweep["seeds"][0]
    groups = {}  # the other overrides → (name, [(metric, rate)])
    lower_better = None
    for setting in sweep["settings"]:
        overrides = dict(setting["overrides"])
        if RATE not in overrides:
            sys.exit(f"choose_rates: pilot setting {setting['name']} of {pilot} sets no {RATE}")
        rate = overrides.pop(RATE)
        name = setting["name"].rsplit(",learning_rate=", 1)[0]  # the listed name, before the grid's part
        run = os.path.join(pilot, setting["name"], f"seed-{seed}")
        result_path = os.path.join(run, "result.json")
        if not os.path.exists(result_path):
            sys.exit(f"choose_rates: {run} has no result.json; finish the pilot sweep first")
        metric = json.load(open(result_path))["training"].get("best_validation_metric")
        if metric is None:
            sys.exit(f"choose_rates: {run} never validated (set validation.every)")
        if lower_better is None:
            lower_better = json.load(open(os.path.join(run, "config.json")))["validation"]["metric"] in ("loss", "perplexity")
        key = json.dumps(overrides, sort_keys=True)
        groups.setdefault(key, (name, overrides, []))[2].append((metric, rate))
    chosen, lines = [], []
    for name, overrides, tried in groups.values():
        best = min(tried, key=lambda t: (t[0], -t[1])) if lower_better else max(tried)
        tried.sort(key=lambda t: t[1])
        lines.append(f"| {name} | " + ", ".join(f"{rate:g}: {metric:.4g}" for metric, rate in tried) + f" | {best[1]:g} |")
        chosen.append({"name": name, "set": {**overrides, RATE: best[1]}})
    os.makedirs(out, exist_ok=True)
    for file, text in (("settings.json", json.dumps(chosen, indent=1) + "\n"),
                       ("learning_rates.md", f"| setting | best validation metric per learning rate (seed {seed}; "
                        f"{'lower' if lower_better else 'higher'} is better) | chosen |\n|---|---|---|\n" + "\n".join(lines) + "\n")):
        with open(os.path.join(out, file + ".part"), "w") as f:
            f.write(text)
        os.replace(os.path.join(out, file + ".part"), os.path.join(out, file))
    print(open(os.path.join(out, "learning_rates.md")).read(), end="")


if __name__ == "__main__":
    main()
