"""report: diagnoses → metrics.json, taxonomy.csv and a self-contained report.html.

Rates are over *judged* claims (`unjudged` is counted and listed, never averaged in).
Metadata breakdowns use the document the deciding evidence came from; a claim with no
evidence (hallucination, unjudged) is attributed to its question's top-ranked
retrieved document — the document the RAG system leaned on.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from ragspan.tasks.schemas import LABELS

FAILURE_LABELS = ("rank_failure", "retrieval_miss", "synthesis_error", "hallucination")
FIX_FOR = {
    "rank_failure": "reranking / context cutoff: the evidence was retrieved but ranked too low",
    "retrieval_miss": "retrieval: embeddings, chunking or query rewriting missed the evidence",
    "synthesis_error": "generation: the model had the evidence in context and misread it",
    "hallucination": "generation / abstention: the model asserted something with no support",
}
# Metadata columns with more distinct values than this are identifiers, not groups.
MAX_GROUPS = 50
_SKIP_META = {"doc_id", "text", "title", "question_id", "question", "reference_answer"}


def label_counts(diagnoses: pd.DataFrame) -> dict[str, dict[str, float | int | None]]:
    counts = diagnoses["label"].value_counts().to_dict()
    judged = sum(v for k, v in counts.items() if k != "unjudged")
    out: dict[str, dict[str, float | int | None]] = {}
    for label in LABELS:
        n = int(counts.get(label, 0))
        rate = None if label == "unjudged" or judged == 0 else round(n / judged, 4)
        out[label] = {"count": n, "rate": rate}
    return out


def attributed_docs(diagnoses: pd.DataFrame, retrieved: pd.DataFrame) -> pd.Series:
    """Per claim, the doc whose metadata it is grouped under (see module docstring)."""
    top = retrieved.sort_values("rank").drop_duplicates("question_id").set_index("question_id")["doc_id"]
    fallback = diagnoses["question_id"].map(top)
    return diagnoses["doc_id"].where(diagnoses["doc_id"].notna(), fallback)


def breakdowns(diagnoses: pd.DataFrame, corpus: pd.DataFrame, questions: pd.DataFrame, retrieved: pd.DataFrame) -> dict:
    frame = diagnoses[["claim_id", "question_id", "label"]].copy()
    frame["_doc"] = attributed_docs(diagnoses, retrieved).to_numpy()
    doc_meta = corpus.drop(columns=[c for c in corpus.columns if c in _SKIP_META and c != "doc_id"]).set_index("doc_id")
    q_meta = questions.drop(columns=[c for c in questions.columns if c in _SKIP_META and c != "question_id"]).set_index("question_id")
    out: dict[str, dict] = {}
    for col in doc_meta.columns:
        frame[col] = frame["_doc"].map(doc_meta[col])
        out[f"doc.{col}"] = _group(frame, col)
    for col in q_meta.columns:
        frame[col] = frame["question_id"].map(q_meta[col])
        out[f"question.{col}"] = _group(frame, col)
    return {k: v for k, v in out.items() if v}


def _group(frame: pd.DataFrame, col: str) -> dict:
    values = frame[col].astype("string").fillna("(none)")
    if values.nunique() > MAX_GROUPS:
        return {}
    return {str(v): label_counts(frame[values == v]) for v in sorted(values.unique())}


def metrics_for(run: str, diagnoses: pd.DataFrame, corpus: pd.DataFrame, questions: pd.DataFrame,
                retrieved: pd.DataFrame, judge_stats: dict, manifest: dict) -> dict:
    labels = label_counts(diagnoses)
    failures = sum(labels[l]["count"] for l in FAILURE_LABELS)
    return {
        "run": run,
        "claims": int(len(diagnoses)),
        "judged": int(len(diagnoses) - labels["unjudged"]["count"]),
        "unjudged": labels["unjudged"]["count"],
        "labels": labels,
        "failure_share": {l: (round(labels[l]["count"] / failures, 4) if failures else None) for l in FAILURE_LABELS},
        "source_conflicts": int(diagnoses["source_conflict"].sum()),
        "by_metadata": breakdowns(diagnoses, corpus, questions, retrieved),
        "judge": judge_stats,
        "manifest": manifest,
    }


def taxonomy_rows(run: str, metrics: dict) -> pd.DataFrame:
    return pd.DataFrame([
        {"run": run, "label": label, "count": v["count"], "rate": v["rate"]}
        for label, v in metrics["labels"].items()
    ])


def taxonomy_text(metrics: dict) -> str:
    """The table printed at the end of `ragspan evaluate`."""
    lines = [f"{'label':<16} {'count':>6} {'rate':>7}", "-" * 31]
    for label, v in metrics["labels"].items():
        rate = "—" if v["rate"] is None else f"{v['rate']:.1%}"
        lines.append(f"{label:<16} {v['count']:>6} {rate:>7}")
    lines.append("-" * 31)
    lines.append(f"{'claims':<16} {metrics['claims']:>6}   (source_conflict flags: {metrics['source_conflicts']})")
    return "\n".join(lines)


_COLORS = {"correct": "#2e7d32", "rank_failure": "#f9a825", "retrieval_miss": "#ef6c00",
           "synthesis_error": "#6a1b9a", "hallucination": "#c62828", "unjudged": "#757575"}
_CONTEXT_CHARS = 160


def _e(text: object) -> str:
    return html.escape("" if text is None or (isinstance(text, float) and pd.isna(text)) else str(text), quote=True)


def render_html(metrics: dict, diagnoses: pd.DataFrame, answers: pd.DataFrame, corpus: pd.DataFrame) -> str:
    """A first report: the breakdown, and each claim with its evidence highlighted in
    its document. Every piece of corpus/answer text goes through html.escape."""
    texts = dict(zip(corpus["doc_id"], corpus["text"]))
    answer_of = dict(zip(answers["question_id"], answers["answer"]))
    bars = []
    for label, v in metrics["labels"].items():
        width = 0 if not metrics["claims"] else 100 * v["count"] / metrics["claims"]
        rate = "—" if v["rate"] is None else f"{v['rate']:.1%}"
        bars.append(f'<tr><td><span class="lab" style="background:{_COLORS[label]}">{label}</span></td>'
                    f'<td class="n">{v["count"]}</td><td class="n">{rate}</td>'
                    f'<td><div class="bar" style="width:{width:.1f}%;background:{_COLORS[label]}"></div></td></tr>')
    fixes = sorted(FAILURE_LABELS, key=lambda l: -metrics["labels"][l]["count"])
    fix_items = "".join(f"<li><b>{l}</b> ({metrics['labels'][l]['count']}): {_e(FIX_FOR[l])}</li>" for l in fixes)
    cards = []
    for qid, group in diagnoses.groupby("question_id", sort=True):
        items = []
        for d in group.to_dict("records"):
            ev = '<p class="none">no evidence span</p>'
            if isinstance(d["doc_id"], str) and pd.notna(d["char_start"]):
                doc = texts[d["doc_id"]]
                s, e = int(d["char_start"]), int(d["char_end"])
                lo, hi = max(0, s - _CONTEXT_CHARS), min(len(doc), e + _CONTEXT_CHARS)
                where = "in context" if d["in_context"] else "not in context"
                rank = "not retrieved" if pd.isna(d["rank"]) else f"rank {int(d['rank'])}"
                ev = (f'<p class="src">{_e(d["doc_id"])} · chunk {_e(d["chunk_id"])} · {rank} · {where} · '
                      f'chars [{s}, {e})</p><pre class="doc">{"…" if lo else ""}{_e(doc[lo:s])}'
                      f'<mark class="span" data-doc="{_e(d["doc_id"])}" data-start="{s}" data-end="{e}">{_e(doc[s:e])}</mark>'
                      f'{_e(doc[e:hi])}{"…" if hi < len(doc) else ""}</pre>')
            flag = ' <span class="flag">source_conflict</span>' if d["source_conflict"] else ""
            items.append(f'<li class="claim" data-label="{d["label"]}"><span class="lab" style="background:{_COLORS[d["label"]]}">'
                         f'{d["label"]}</span>{flag} {_e(d["claim"])}<p class="why">{_e(d["reason"])}</p>{ev}</li>')
        cards.append(f'<section class="q"><h3>{_e(qid)}</h3><p class="answer">{_e(answer_of.get(qid, ""))}</p>'
                     f'<ul>{"".join(items)}</ul></section>')
    manifest = _e(json.dumps(metrics["manifest"], indent=1, sort_keys=True))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>ragspan report — {_e(metrics['run'])}</title>
<style>
body{{font:15px/1.5 system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}}
table{{border-collapse:collapse}} td{{padding:2px 8px}} td.n{{text-align:right}}
.bar{{height:14px;min-width:1px}} .lab{{color:#fff;border-radius:3px;padding:0 6px;font-size:12px}}
.flag{{background:#000;color:#fff;border-radius:3px;padding:0 6px;font-size:12px}}
pre.doc{{white-space:pre-wrap;background:#f6f6f6;padding:6px;border-left:3px solid #999}}
mark.span{{background:#ffe082}} .why,.src{{color:#555;font-size:13px;margin:2px 0}} li.claim{{margin:8px 0}}
.answer{{font-style:italic}}
</style></head><body>
<h1>ragspan — {_e(metrics['run'])}</h1>
<p>{metrics['claims']} claims, {metrics['judged']} judged, {metrics['unjudged']} unjudged (excluded from rates);
{metrics['source_conflicts']} source_conflict flags.</p>
<table>{''.join(bars)}</table>
<h2>What to fix first</h2><ol>{fix_items}</ol>
<h2>Claims and evidence</h2>{''.join(cards)}
<h2>Manifest</h2><pre>{manifest}</pre>
</body></html>
"""


def spans_from_judgements(judgements: pd.DataFrame) -> pd.DataFrame:
    from ragspan.tasks import schemas

    found = judgements[judgements["match"].notna() & (judgements["source"] != "reference")]
    cols = list(schemas.Spans.to_schema().columns)
    return schemas.Spans.validate(found[cols].reset_index(drop=True))


def broken_spans(spans: pd.DataFrame, corpus: pd.DataFrame) -> list[str]:
    """Claim ids of spans breaking `doc[start:end] == text` (must be empty to write)."""
    texts = dict(zip(corpus["doc_id"], corpus["text"]))
    return [c for c, d, s, e, t in zip(spans["claim_id"], spans["doc_id"], spans["char_start"],
                                      spans["char_end"], spans["span_text"]) if texts[d][s:e] != t]


def write_results(out_dir: Path, run: str, claims: pd.DataFrame, judgements: pd.DataFrame,
                  diagnoses: pd.DataFrame, answers: pd.DataFrame, retrieved: pd.DataFrame,
                  corpus: pd.DataFrame, questions: pd.DataFrame, judge_stats: dict, manifest: dict) -> dict:
    """Compute metrics and write every output of DESIGN §4 atomically; returns metrics."""
    from ragspan.tasks.outputs import write_atomic_dir

    spans = spans_from_judgements(judgements)
    bad = broken_spans(spans, corpus) + broken_spans(diagnoses.dropna(subset=["char_start"]), corpus)
    if bad:  # a bug upstream, never data: refuse to write rather than write a lie
        raise AssertionError(f"span invariant broken for claims {bad[:5]}")
    metrics = metrics_for(run, diagnoses, corpus, questions, retrieved, judge_stats, manifest)
    write_atomic_dir(out_dir, {
        "claims.parquet": lambda p: claims.to_parquet(p, index=False),
        "spans.parquet": lambda p: spans.to_parquet(p, index=False),
        "diagnoses.parquet": lambda p: diagnoses.to_parquet(p, index=False),
        "metrics.json": lambda p: p.write_text(json.dumps(metrics, indent=2, sort_keys=False) + "\n", encoding="utf-8"),
        "taxonomy.csv": lambda p: taxonomy_rows(run, metrics).to_csv(p, index=False),
        "report.html": lambda p: p.write_text(render_html(metrics, diagnoses, answers, corpus), encoding="utf-8"),
    })
    return metrics


# Not cached: its outputs are DVC outs, which DVC deletes before a stage runs.
@task(name="report", cache_policy=NO_CACHE)
def report(out_dir: Path, ws, settings, spec, parts: list, judge_stats, task_states: dict) -> dict:
    """Concatenate the shards' tables and write results/<run>/ (see write_results)."""
    from ragspan.tasks.manifest import manifest_for

    claims = pd.concat([p[0] for p in parts], ignore_index=True) if parts else pd.DataFrame()
    judgements = pd.concat([t for p in parts for t in (p[1], p[2])], ignore_index=True) if parts else pd.DataFrame()
    diagnoses = pd.concat([p[3] for p in parts], ignore_index=True) if parts else pd.DataFrame()
    manifest = manifest_for(ws.run, ws.data_dir, ws.input_files, settings, spec)
    stats = {**judge_stats.model_dump(), "judge": spec.kind, "model": spec.model,
             "prompt_version": spec.prompt_version, "task_states": task_states}
    return write_results(out_dir, ws.run, claims, judgements, diagnoses, ws.answers, ws.retrieved,
                         ws.corpus, ws.questions, stats, manifest)
