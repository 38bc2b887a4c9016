#!/usr/bin/env python3
"""A sweep's run records in the repository: what they keep and how check works is in
docs/experiments/README.md, "Run records".

    python3 scripts/sweep_records.py keep SWEEP [--records DIR]      # SWEEP → DIR (docs/experiments/records/NAME)
    python3 scripts/sweep_records.py restore SWEEP [--records DIR]   # DIR → SWEEP (runs/NAME, the sweep's --out)
    python3 scripts/sweep_records.py check [NAME …] [--hnas BIN]     # every record, or the NAMEs
    python3 scripts/sweep_records.py figures [--findings FILE]        # docs/findings.md against FIGURES
"""
import argparse, io, json, lzma, os, subprocess, sys, tarfile, tempfile

RECORDS = os.path.join("docs", "experiments", "records")
ARCHIVE = "trials.tar.xz"
PLAIN = ("sweep.json", "settings.json", "learning_rates.md")
RUN_FILES = ("config.json", "metrics.jsonl", "result.json", "test_outputs.txt")
TRAINING_DIAGNOSTICS = ("kind", "min_sum", "fraction_below_epsilon")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FINDINGS, FIGURES = os.path.join(ROOT, "docs", "findings.md"), os.path.join(ROOT, "docs", "experiments", "findings_figures.json")

def parse(line):
    try:
        return json.loads(line)
    except ValueError:  # a line a killed run left unfinished: every reader skips it
        return None

def compact_metrics(text):
    records = [r for r in map(parse, text.splitlines()) if isinstance(r, dict)]
    validations = [i for i, r in enumerate(records) if "step" in r and "loss" not in r]
    top = max((records[i]["step"] for i in validations), default=None)
    last = set(validations[-1:]) | {i for i in validations if records[i]["step"] == top}  # what report reads last
    for i, record in enumerate(records):
        record.pop("memory", None), record.pop("profile", None)
        for attention in ({} if i in last else record.get("diagnostics", {}).get("attentions", {})).values():
            for key in [k for k in attention if k not in TRAINING_DIAGNOSTICS]:
                del attention[key]
    return "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)

def sweep_files(sweep):
    """{relative path: bytes} of what keep takes from SWEEP, and the number of finished trials."""
    files, trials = {}, 0
    for root, dirs, names in os.walk(sweep):
        dirs[:] = [] if "metrics.jsonl" in names else sorted(dirs)  # a trial's run directory holds no other
        finished = "metrics.jsonl" in names and "result.json" in names
        wanted = RUN_FILES if finished else () if "metrics.jsonl" in names else PLAIN + ("comparison.json",)
        paths = [os.path.join(root, n) for n in wanted if n in names]
        paths += [path for path in [root + ".trial.json"] if finished and os.path.exists(path)]
        for path in paths:
            data = open(path, "rb").read()
            files[os.path.relpath(path, sweep)] = compact_metrics(data.decode()).encode() if path.endswith(".jsonl") else data
        trials += finished
    return files, trials

def write_atomically(path, data):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path + ".part", "wb") as f:
        f.write(data)
    os.replace(path + ".part", path)

def record_files(records, archive_name=ARCHIVE):
    """{relative path: bytes} of a record: its archive and the plain files beside it."""
    files = {}
    if os.path.exists(os.path.join(records, archive_name)):
        with tarfile.open(os.path.join(records, archive_name), "r:xz") as archive:
            files = {os.path.normpath(m.name): archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}
    plain = [os.path.join(root, n) for root, _, names in os.walk(records) for n in names if n in PLAIN]
    return files | {os.path.relpath(path, records): open(path, "rb").read() for path in plain}

def keep(sweep, records):
    files, trials = sweep_files(sweep)
    archived = {n: d for n, d in record_files(records).items() if os.path.basename(n) not in PLAIN}
    [write_atomically(os.path.join(records, n), d) for n, d in files.items() if os.path.basename(n) in PLAIN]
    archived.update({n: d for n, d in files.items() if os.path.basename(n) not in PLAIN})
    tar = io.BytesIO()  # the same files give the same bytes: sorted, no times, no owners
    with tarfile.open(fileobj=tar, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name in sorted(archived):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(archived[name]), 0o644, 0
            archive.addfile(info, io.BytesIO(archived[name]))
    write_atomically(os.path.join(records, ARCHIVE), lzma.compress(tar.getvalue(), preset=9 | lzma.PRESET_EXTREME))
    print(f"sweep_records: keep: {trials} finished trials, {len(files)} files written to {records}")

def restore(records, sweep):
    files = record_files(records)
    missing = {n: d for n, d in files.items() if not os.path.exists(os.path.join(sweep, n))}
    [write_atomically(os.path.join(sweep, name), data) for name, data in sorted(missing.items())]
    trials = sum(os.path.basename(n) == "result.json" for n in files)
    print(f"sweep_records: restore: {trials} finished trials, {len(missing)} of {len(files)} files written to {sweep}")
    return files

def compared_paths(name, stored, files, expected):
    """A sweep's comparison is of its folder; one beside sweeps (compare A B --out DIR), of those it holds, in order."""
    folder = os.path.dirname(stored)
    if os.path.join(folder, "sweep.json") in files:
        return [os.path.join(name, folder)]
    order = [s["setting"] for s in expected["settings"]]
    sweeps = {os.path.dirname(n): [s["name"] for s in json.loads(files[n])["settings"]] for n in files
              if os.path.basename(n) == "sweep.json" and os.path.dirname(os.path.dirname(n)) == folder}
    inside = sorted((order.index(names[0]), sweep) for sweep, names in sweeps.items() if set(names) <= set(order))
    return [os.path.join(name, sweep) for _, sweep in inside]

def check(names, hnas):
    names = names or sorted(n for n in os.listdir(RECORDS) if os.path.exists(os.path.join(RECORDS, n, ARCHIVE)))
    failures, env = 0, dict(os.environ, OMP_NUM_THREADS="1")  # one thread: check shares the machine
    with tempfile.TemporaryDirectory() as scratch:
        run = lambda *args: subprocess.run([hnas, *args], cwd=scratch, env=env, capture_output=True, text=True)
        for name in names:
            files = restore(os.path.join(RECORDS, name), os.path.join(scratch, name))
            for stored in sorted(n for n in files if os.path.basename(n) == "comparison.json"):
                expected = json.loads(files[stored])
                paths, out = compared_paths(name, stored, files, expected), os.path.join(scratch, "out", name, stored)
                done = run("compare", *paths, "--out", os.path.dirname(out)) if paths else None
                again = json.load(open(out)) if done and not done.returncode else {}
                failures += again != expected
                print(f"check: hnas compare {' '.join(paths)}: {'the same' if again == expected else 'NOT THE SAME'} "
                      f"({len(again.get('settings', []))} settings, {len(again.get('pairs', []))} paired tests)")
            for sweep in sorted({os.path.dirname(n) for n in files if os.path.basename(n) == "sweep.json"}) or [""]:
                folder = os.path.normpath(os.path.join(name, sweep))
                page = os.path.join(scratch, folder + ".report.html")
                done = run("report", folder, "--out", page)
                charts = open(page).read().count("<svg") if not done.returncode else 0
                failures += done.returncode != 0 or charts == 0
                print(f"check: hnas report {folder}: {charts} charts" + (f"; FAILED: {done.stdout[-300:]}" if done.returncode else ""))
    print(f"sweep_records: check: {len(names)} records, " + (f"{failures} FAILED" if failures else "every comparison the same"))
    return failures == 0

def stored_comparison(source):
    """A comparison under docs/experiments: NAME.comparison.json.xz, or records/NAME/PATH inside a record's archive."""
    path = os.path.join(ROOT, "docs", "experiments", source)
    if source.endswith(".xz"):
        return json.loads(lzma.open(path).read())
    parts = source.split("/")
    records = os.path.join(ROOT, RECORDS, parts[1])
    results = "results.tar.xz"  # an intervention's test results, no trials
    files = record_files(records, results if os.path.exists(os.path.join(records, results)) else ARCHIVE)
    return json.loads(files[os.path.join(*parts[2:])])

def rounded(value, digits, sign=""):
    """The texts value may print as at digits decimals: both roundings of a tie (36.25), which summation order decides."""
    return {format(v, f"{sign}.{digits}f").replace("-", "\u2212") for v in (value * (1 - 1e-12), value * (1 + 1e-12))}

def figure_text(comparison, spec):
    """One figure as findings.md prints it. spec: 'mean|se SETTING METRIC SCALE DIGITS' or
    'diff|dz|perm|boot|perm_holm|boot_holm A B METRIC SCALE DIGITS' (A − B, signed; a pair stored as B, A is negated)."""
    what, *names, metric, scale, digits = spec.split()
    scale, digits = float(scale), int(digits)
    if what in ("mean", "se"):
        [setting] = [s for s in comparison["settings"] if s["setting"] == names[0]]
        return rounded(setting["metrics"][metric]["mean" if what == "mean" else "standard_error"] * scale, digits)
    [(pair, sign)] = [(p, 1 if p["a"] == names[0] else -1) for p in comparison["pairs"]
                      if p["metric"] == metric and {p["a"], p["b"]} == set(names)]
    if what == "diff":
        return rounded(sign * pair["mean_difference"] * scale, digits, "+")
    if what == "dz":
        return rounded(sign * pair["permutation"]["effect_size"], digits)
    test = pair["permutation" if what.startswith("perm") else "bootstrap"]
    p = test["p_holm" if what.endswith("holm") else "p_value"]
    return {"< 0.001"} if p < 0.001 else rounded(p, digits)

def check_figures(findings=FINDINGS):
    """Every figure FIGURES names must appear, as recomputed from its stored comparison, in its row of findings."""
    rows = {line.split("|")[1].strip(): line for line in open(findings, encoding="utf-8") if line.startswith("| ")}
    failures = checked = 0
    groups = json.load(open(FIGURES))
    for group in groups:
        comparison, row = stored_comparison(group["source"]), rows.get(group["row"], "")
        for spec in group["figures"]:
            texts, checked = figure_text(comparison, spec), checked + 1
            if not any(text in row for text in texts):
                failures += 1
                print(f"figures: row {group['row']}: {spec} is {' or '.join(sorted(texts))} in {group['source']}, not in the row")
    covered = len({g["row"] for g in groups})
    print(f"sweep_records: figures: {checked} figures of {covered} rows of {os.path.relpath(findings, ROOT)}: "
          + (f"{failures} NOT IN THEIR ROW" if failures else "each as its stored comparison gives it"))
    return failures == 0

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("keep", "restore", "check", "figures"))
    parser.add_argument("sweep", nargs="*", help="keep, restore: the sweep's folder (runs/NAME); check: record names")
    parser.add_argument("--records", help="where the records are kept (default docs/experiments/records/NAME)")
    parser.add_argument("--findings", default=FINDINGS, help="figures: the page to hold to the records")
    parser.add_argument("--hnas", default=os.environ.get("HNAS", "build/hnas"), help="check: the hnas executable")
    args = parser.parse_intermixed_args()
    if args.action == "figures":
        sys.exit(0 if check_figures(args.findings) else 1)
    if args.action == "check":
        sys.exit(0 if check(args.sweep, os.path.abspath(args.hnas)) and (args.sweep or check_figures()) else 1)
    if len(args.sweep) != 1:
        parser.error(f"{args.action} takes one sweep folder")
    sweep = os.path.normpath(args.sweep[0])
    records = args.records or os.path.join(RECORDS, os.path.basename(sweep))
    source, target = (sweep, records)[:: 1 if args.action == "keep" else -1]
    if not any(os.path.exists(os.path.join(source, f)) for f in ("sweep.json", "pilot", ARCHIVE)):
        sys.exit(f"sweep_records: {source} holds no hnas sweep (no sweep.json, pilot/ or {ARCHIVE})")
    (keep if args.action == "keep" else restore)(source, target)

if __name__ == "__main__":
    main()
