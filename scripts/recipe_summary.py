"""The summary of scripts/recipe_gigaword.sh: each kind's test ROUGE beside the lead-8 baseline, then
the first ten test articles (as they come, not chosen) with their reference and each kind's headline.
Writes OUT/summary.md and prints it.
    python3 scripts/recipe_summary.py OUT INIT SEED ARTICLES REFERENCES KIND...
"""
import json
import os
import sys


def main():
    out, init, seed, articles_path, references_path = sys.argv[1:6]
    kinds = sys.argv[6:]
    initialization = {"bert": "⟨BERT,BERT⟩", "random": "⟨Random,Random⟩", "hfbert": "⟨BERT,BERT⟩ from the imported BERT"}[init]
    lead = json.load(open(os.path.join(out, "lead8.rouge.json")))
    rows = [("lead-8 baseline", [100 * lead[k]["f1"] for k in ("rouge-1", "rouge-2", "rouge-l")])]
    headlines = {}
    for kind in kinds:
        run = os.path.join(out, f"headline_{kind}-{init}-seed{seed}")
        metrics = json.load(open(os.path.join(run, "result.json")))["metrics"]
        rows.append((f"{initialization}, {kind} encoder", [metrics[k] for k in ("rouge_1", "rouge_2", "rouge_l")]))
        headlines[kind] = open(os.path.join(run, "test_outputs.txt")).read().splitlines()
    lines = ["| Gigaword test (1,951 pairs), ROUGE-1.5.5 -m F1 % | ROUGE-1 | ROUGE-2 | ROUGE-L |", "|---|---|---|---|"]
    lines += [f"| {name} | " + " | ".join(f"{value:.2f}" for value in values) + " |" for name, values in rows]
    articles = open(articles_path).read().splitlines()[:10]
    references = open(references_path).read().splitlines()[:10]
    lines += ["", "The first ten test articles:", ""]
    for i, (article, reference) in enumerate(zip(articles, references)):
        lines += [f"{i + 1}. article: {article}", f"   - reference: {reference}"]
        lines += [f"   - {kind}: {headlines[kind][i]}" for kind in kinds]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "summary.md.part"), "w") as f:
        f.write(text)
    os.replace(os.path.join(out, "summary.md.part"), os.path.join(out, "summary.md"))
    print(text, end="")


if __name__ == "__main__":
    main()
