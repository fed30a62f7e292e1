"""A LODO results file as the Markdown tables docs/local-judge.md quotes.

    .venv/bin/python -m benchmarks.lodo.table [benchmarks/results/lodo-local-5.json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NAMES = {
    "wice": "WiCE dev: Wikipedia claims vs the cited page",
    "factcheck": "Factcheck-GPT: ChatGPT claims vs web snippets",
    "xquad": "XQuAD: short answers with their question",
    "clapnq": "ClapNQ: long answers vs a passage",
    "dialogue": "BEGIN + FaithDial: dialogue responses",
    "summedits": "SummEdits: summaries vs their document",
    "attributionbench": "AttributionBench: search answers vs cited evidence",
    "pubmedqa": "PubMedQA: \"Yes.\" / \"No.\" with the question",
}


def _f(v: object) -> str:
    return f"{v:.3f}" if isinstance(v, float) else "—"


def render(doc: dict) -> str:
    lodo = doc["lodo"]
    chosen = doc["chosen"]
    base = [b for b in ("contexttrace", "lr7-plain", "local-4") if b in lodo]
    lines = [
        f"| set | n | **local-5** ({chosen} + rules) | " + " | ".join(base) + " | AUC | ECE | uncertain | within-set CV |",
        "|---|---|---|" + "---|" * len(base) + "---|---|---|---|",
    ]
    sets = list(lodo[chosen])
    for s in sets:
        r = lodo[chosen][s]
        cv = doc.get("within_set_cv", {}).get(chosen, {}).get(s)
        lines.append(
            f"| {NAMES.get(s, s)} | {r['n']} | **{_f(r['balanced_accuracy'])}** | "
            + " | ".join(_f(lodo[b][s]["balanced_accuracy"]) for b in base)
            + f" | {_f(r['auc'])} | {_f(r['ece'])} | {r['uncertain']:.0%} | {_f(cv)} |"
        )
    for label, fn in (("mean", lambda v: sum(v) / len(v)), ("minimum", min)):
        cells = [fn([lodo[d][s]["balanced_accuracy"] for s in sets]) for d in [chosen, *base]]
        lines.append(f"| {label} | | **{cells[0]:.3f}** | " + " | ".join(f"{c:.3f}" for c in cells[1:]) + " | | | | |")
    out = ["\n".join(lines), ""]
    designs = [d for d in lodo if d not in base]
    out.append("| design | " + " | ".join(designs) + " |")
    out.append("|---|" + "---|" * len(designs))
    for label, fn in (("mean", lambda v: sum(v) / len(v)), ("minimum", min)):
        out.append(f"| {label} balanced accuracy | " + " | ".join(
            f"{fn([lodo[d][s]['balanced_accuracy'] for s in sets]):.3f}" for d in designs) + " |")
    out.append("")
    planted = doc["planted"][chosen]
    plain = doc["planted"].get("lr7-plain")
    out.append("| planted change | n | local-5: not supported |" + (" lr7-plain |" if plain else ""))
    out.append("|---|---|---|" + ("---|" if plain else ""))
    for k, v in planted.items():
        val = v.get("not_supported", v.get("supported"))
        label = "unchanged (control): **supported**" if k == "control" else k
        extra = f" {next(x for n, x in plain[k].items() if n != 'n'):.3f} |" if plain else ""
        out.append(f"| {label} | {v['n']} | {val:.3f} |" + extra)
    if doc.get("pipeline"):
        out.append("")
        out.append("| set, through `ragspan evaluate` | balanced accuracy | AUC | ECE | unjudged | seconds |")
        out.append("|---|---|---|---|---|---|")
        for s, r in doc["pipeline"].items():
            out.append(f"| {s} | {_f(r['balanced_accuracy'])} | {_f(r['auc'])} | {_f(r['ece'])} | {r['unjudged']} | "
                       f"{r['seconds']} |")
    spans = {s: lodo[chosen][s] for s in sets if lodo[chosen][s].get("span_n")}
    if spans:
        out.append("")
        out.append("Span hit rate / mean IoU (supported verdicts on gold-supported claims): " + "; ".join(
            f"{s} {r['span_hit']:.3f} / {r['span_iou']:.3f} (n={r['span_n']})" for s, r in spans.items()))
    return "\n".join(out)


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "benchmarks" / "results" / "lodo-local-5.json"
    print(render(json.loads(path.read_text(encoding="utf-8"))))
