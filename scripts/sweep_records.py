#!/usr/bin/env python3
"""Keeps a sweep's finished trials in the repository, and puts them back, so a sweep longer than one
machine's life resumes on the next machine where it stopped (docs/experiments.md, "Sweeps that outlast a
machine").

    python3 scripts/sweep_records.py keep SWEEP [--records DIR]      # SWEEP → DIR
    python3 scripts/sweep_records.py restore SWEEP [--records DIR]   # DIR → SWEEP

SWEEP is the sweep's folder (runs/NAME, as its command's --out); DIR defaults to
docs/experiments/records/NAME.

keep copies, of every finished trial (a run directory holding result.json), its text records: config.json,
metrics.jsonl, result.json, test_outputs.txt and the sweep's seed-N.trial.json and seed-N.log beside it;
and the sweep's own files (sweep.json, a --rates sweep's settings.json and learning_rates.md, comparisons).
Checkpoints, tokenizers and unfinished trials stay behind: `hnas sweep` skips a trial whose result.json
exists and trains the others from the start. restore copies the records into SWEEP without overwriting a
file that is there; then the sweep's own command continues it.
"""
import argparse
import os
import shutil
import sys

RECORDS = os.path.join("docs", "experiments", "records")
RUN_FILES = ("config.json", "metrics.jsonl", "result.json", "test_outputs.txt")
SWEEP_FILES = ("sweep.json", "settings.json", "learning_rates.md", "comparison.md", "comparison.json")


def copy(source, target, overwrite):
    if not overwrite and os.path.exists(target):
        return 0
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copyfile(source, target + ".part")
    os.replace(target + ".part", target)
    return 1


def kept_files(sweep):
    """(relative path) of every file keep takes from the sweep folder SWEEP."""
    files = []
    for root, dirs, names in os.walk(sweep):
        dirs.sort()
        relative = os.path.relpath(root, sweep)
        if "metrics.jsonl" in names:  # a trial's run directory
            dirs.clear()
            if "result.json" not in names:
                continue
            files += [os.path.join(relative, name) for name in RUN_FILES if name in names]
            for suffix in (".trial.json", ".log"):
                beside = root + suffix
                if os.path.exists(beside):
                    files.append(os.path.relpath(beside, sweep))
        else:
            files += [os.path.join(relative, name) for name in SWEEP_FILES if name in names]
    return [os.path.normpath(path) for path in files]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("keep", "restore"))
    parser.add_argument("sweep", help="the sweep's folder, e.g. runs/pretrain_screen")
    parser.add_argument("--records", help="where the records are kept (default docs/experiments/records/NAME)")
    args = parser.parse_args()
    sweep = os.path.normpath(args.sweep)
    records = args.records or os.path.join(RECORDS, os.path.basename(sweep))
    source, target = (sweep, records) if args.action == "keep" else (records, sweep)
    if not os.path.isfile(os.path.join(source, "sweep.json")) and not os.path.isdir(os.path.join(source, "pilot")):
        sys.exit(f"sweep_records: {source} is not an hnas sweep folder (no sweep.json, no pilot/)")
    files = kept_files(source)
    overwrite = args.action == "keep"
    written = sum(copy(os.path.join(source, path), os.path.join(target, path), overwrite) for path in files)
    trials = sum(os.path.basename(path) == "result.json" for path in files)
    print(f"sweep_records: {args.action}: {trials} finished trials, {written} of {len(files)} files written to {target}")


if __name__ == "__main__":
    main()
