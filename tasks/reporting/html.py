"""report.html: one self-contained page per run (no network, no external asset).

    headline ── label counts, rates with bootstrap 95% CIs, unjudged, judge + data manifest
    deltas ──── when a comparison (`ragspan compare --format json`) is given
    charts ──── taxonomy; rank of the supporting evidence vs the context cutoff;
                labels by every metadata column (doc.*, question.*) of metrics["by_metadata"]
    what to fix  each failure label → its pipeline stage, ordered by share of failures
    claims ──── per question: the answer with each claim's span coloured by label; per
                claim every validated evidence span (spans.parquet) inside its document,
                the deciding one marked; filters by label, metadata and text (JavaScript)

Safety: every piece of corpus, question, answer and metadata text goes through `_e`
(HTML-escaped, quotes included; CR kept as `&#13;` so the highlighted text is the exact
corpus substring). No data is ever interpolated into the script, which is static; a
Content-Security-Policy allows only that script (by hash), inline styles and data: images,
so even a bug in escaping could not run injected code or reach the network.

Each evidence highlight is `<mark class="ev" data-doc data-start data-end data-claim>`;
offsets are Python code-point offsets into the document (docs/design.md §1). There is one such
mark per row of spans.parquet (plus, defensively, a deciding span missing from it).

The optional `comparison` is the JSON of `ragspan compare --format json` with this run as
side B. Keys read: `a.name`, `a.run`, `a.git_rev`, `b.name`, `b.run`, `bootstrap.level`,
`overall[]` (`label`, `a_rate`, `b_rate`, `delta`, `ci_low`, `ci_high`, `within_noise`),
`transitions.changed[]` (`from`, `to`, `count`) and `worse[]` (its length); any missing key
is shown as absent, never an error.
"""

from __future__ import annotations

import base64
import hashlib
import html
import itertools
import json
from collections.abc import Mapping

import pandas as pd
from ragspan.tasks.core.documents import DocumentTexts
from ragspan.tasks.core.schemas import records
from ragspan.tasks.core.taxonomy import FIX_FOR, LABELS, STAGES
from ragspan.tasks.reporting import charts, stats
from ragspan.tasks.reporting.chunker import chunker_line, cut_evidence_html
from ragspan.tasks.reporting.drilldown import rows_of, shown_questions
from ragspan.tasks.reporting.findings import concentration, concentration_text, fix_order
from ragspan.tasks.reporting.formatting import cascade_note
from ragspan.tasks.reporting.formatting import int_or_none as _int
from ragspan.tasks.reporting.formatting import is_missing as _missing
from ragspan.tasks.reporting.formatting import pct as _pct
from ragspan.tasks.reporting.formatting import pp as _pp
from ragspan.tasks.reporting.groups import claim_groups
from ragspan.tasks.reporting.html_assets import PAGE_SCRIPT, page_css

CONTEXT_CHARS = 160
_VERDICT_ORDER = {"supported": 0, "partial": 1, "unsupported": 2}


# Above this many questions the drill-down shows those with the most failures only.
MAX_DRILLDOWN_QUESTIONS = 2000


def _e(text: object) -> str:
    """Escaped text/attribute value; CR survives the HTML parser as a character reference."""
    if _missing(text):
        return ""
    return html.escape(str(text), quote=True).replace("\r", "&#13;").replace("\x00", "\ufffd")


# --------------------------------------------------------------------------- headline


def _intervals(metrics: dict, diagnoses: pd.DataFrame | None) -> dict:
    ci = metrics.get("rate_ci95")
    return ci if ci or diagnoses is None else stats.rate_intervals(diagnoses)


def _headline(metrics: dict, diagnoses: pd.DataFrame | None, comparison: dict | None) -> str:
    ci = _intervals(metrics, diagnoses)
    deltas = {r.get("label"): r for r in (comparison or {}).get("overall", []) if isinstance(r, dict)}
    a_name = _e(((comparison or {}).get("a") or {}).get("name", "previous run"))
    head = "<tr><th>label</th><th>claims</th><th>rate</th><th>95% CI</th>"
    if comparison:
        head += f"<th>Δ vs {a_name}</th><th>95% CI of Δ</th><th></th>"
    rows = [head + "</tr>"]
    for label, v in metrics["labels"].items():
        c = ci.get(label) or {}
        interval = "—" if _missing(c.get("low")) else f"{c['low']:.1%} – {c['high']:.1%}"
        cells = (f'<td><a class="lab lab-{_e(label)} to-label" href="#claims" data-label="{_e(label)}">'
                 f'{_e(label)}</a></td><td class="n">{v["count"]}</td><td class="n">{_pct(v["rate"])}</td>'
                 f'<td class="n ci">{interval}</td>')
        if comparison:
            d = deltas.get(label) or {}
            dci = ("—" if _missing(d.get("ci_low")) else
                   f"{d['ci_low'] * 100:+.1f} – {d['ci_high'] * 100:+.1f} pp")
            noise = "" if not d else ("within noise" if d.get("within_noise") else "<b>changed</b>")
            cells += f'<td class="n">{_pp(d.get("delta"))}</td><td class="n ci">{dci}</td><td>{noise}</td>'
        rows.append(f"<tr>{cells}</tr>")
    boot = metrics.get("bootstrap") or stats.bootstrap_spec()
    judge = metrics.get("judge") or {}
    summary = (f'<p class="big"><b>{metrics["judged"]}</b> claims judged of {metrics["claims"]} · '
               f'<b>{metrics["unjudged"]}</b> unjudged (counted, excluded from rates) · '
               f'{metrics.get("source_conflicts", 0)} source_conflict flags · '
               f'{(metrics.get("chunk_split") or {}).get("claims", 0)} chunk_split flags</p>')
    summary += _answer_chars_line(metrics)
    note = (f'<p class="note">Rates are over judged claims. 95% CI: {boot.get("method", "percentile")} '
            f'bootstrap over {_e(boot.get("resamples"))} resamples of {_e(boot.get("unit", "question"))}s '
            f'(seed {_e(boot.get("seed"))}); the claims of one answer move together.</p>')
    judge_line = (f'{_e(judge.get("judge"))} · model {_e(judge.get("model"))} · prompt '
                  f'{_e(judge.get("prompt_version"))} · {_e(judge.get("calls"))} calls, '
                  f'{_e(judge.get("cache_hits"))} cache hits, {_e(judge.get("errors"))} errors, '
                  f'{_e(judge.get("invalid_quotes"))} invalid quotes, '
                  f'{_e(judge.get("prompt_tokens"))}+{_e(judge.get("completion_tokens"))} tokens'
                  + (f' · {_e(cascade_note(judge))}' if cascade_note(judge) else ''))
    return (f'<section id="summary"><h2>Headline</h2>{summary}<table class="head">{"".join(rows)}</table>'
            f'{note}<dl class="manifest"><dt>judge</dt><dd>{judge_line}</dd>{_data_manifest(metrics)}</dl>'
            "</section>")


def _answer_chars_line(metrics: dict) -> str:
    """The share of the answers' characters by support, with intervals."""
    chars = metrics.get("answer_chars") or {}
    share, ci = chars.get("share") or {}, chars.get("ci95") or {}
    if not share or share.get("supported") is None:
        return ""
    parts = []
    for name in ("supported", "unsupported", "contradicted", "not_checked"):
        c = ci.get(name) or {}
        interval = "" if _missing(c.get("low")) else f' <span class="ci">({c["low"]:.1%} – {c["high"]:.1%})</span>'
        parts.append(f"{name.replace('_', ' ')} <b>{share[name]:.1%}</b>{interval}")
    return f'<p class="chars">Answer characters: {" · ".join(parts)}</p>'


def _data_manifest(metrics: dict) -> str:
    m = metrics.get("manifest") or {}
    data = m.get("data") or {}
    inputs = " · ".join(f"{_e(k)} <code>{_e(v)}</code>" for k, v in (m.get("inputs_md5") or {}).items())
    dirty = " (uncommitted changes)" if m.get("git_dirty") else ""
    return (f'<dt>data</dt><dd>{_e(data.get("dir"))} · DVC <code>{_e(data.get("dvc_md5") or "—")}</code>'
            f'</dd><dt>inputs (md5)</dt><dd>{inputs or "—"}</dd>'
            f'<dt>code</dt><dd>{_e(m.get("code_version"))} · git <code>{_e(m.get("git_rev") or "—")}</code>'
            f'{dirty} · params <code>{_e(m.get("params_hash"))}</code></dd>')


def _comparison(metrics: dict, comparison: dict | None) -> str:
    if not comparison:
        return ""
    a, b = comparison.get("a") or {}, comparison.get("b") or {}
    parts = [f'<section id="compare"><h2>Compared with {_e(a.get("name", "previous run"))}</h2>',
             (f'<p>A = {_e(a.get("name"))} (run {_e(a.get("run"))}, git <code>{_e(a.get("git_rev") or "—")}'
              f'</code>) → B = {_e(b.get("name"))} (run {_e(b.get("run"))}). Deltas are B − A, in the '
              "headline table.</p>")]
    if b.get("run") not in (None, metrics.get("run")):
        parts.append(f'<p class="warn">Side B of the comparison is run {_e(b.get("run"))}, not this run '
                     f'({_e(metrics.get("run"))}).</p>')
    changed = (comparison.get("transitions") or {}).get("changed") or []
    if changed:
        items = "".join(f'<li>{_e(c.get("count"))} claims <span class="lab lab-{_e(c.get("from"))}">'
                        f'{_e(c.get("from"))}</span> → <span class="lab lab-{_e(c.get("to"))}">'
                        f'{_e(c.get("to"))}</span></li>' for c in changed[:10])
        parts.append(f"<h3>Label transitions of matched claims</h3><ul>{items}</ul>")
    if "worse" in comparison:
        parts.append(f'<p>{len(comparison.get("worse") or [])} claims got worse.</p>')
    parts.append("</section>")
    return "".join(parts)


# --------------------------------------------------------------------------- charts


def _breakdown_table(key: str, groups: dict) -> str:
    labels = list(LABELS)
    head = "<tr><th>" + _e(key) + "</th><th>n</th>" + "".join(f"<th>{_e(label)}</th>" for label in labels) + "</tr>"
    rows = []
    for value, counts in groups.items():
        n = sum(c["count"] for c in counts.values())
        cells = "".join(f'<td class="n">{counts.get(label, {}).get("count", 0)}</td>' for label in labels)
        rows.append(f'<tr><td>{_e(value)}</td><td class="n">{n}</td>{cells}</tr>')
    return f'<details><summary>table</summary><table class="grid">{head}{"".join(rows)}</table></details>'


def _charts(metrics: dict, diagnoses: pd.DataFrame, retrieved: pd.DataFrame | None) -> str:
    positions = charts.evidence_positions(diagnoses, retrieved)
    rank_rows = "".join(f'<tr><td>{_e(p.label)}</td><td class="n">{p.count}</td></tr>' for p in positions)
    parts = ['<section id="charts"><h2>Breakdown</h2>',
             f'<figure class="chart">{charts.to_svg(charts.taxonomy_chart(metrics), standalone=False)}</figure>',
             (f'<figure class="chart">{charts.to_svg(charts.rank_chart(positions), standalone=False)}'
              '<figcaption>Where the deciding supporting evidence sat. Above the line the model had it, '
              "one bar per rank of the context window (rank 1: the retriever's top chunk); below it the "
              "retriever found it but ranked it past the question's context cutoff (rank_failure: how many "
              "ranks past), or only the corpus-wide search found it (retrieval_miss).</figcaption>"
              f'<details><summary>table</summary><table class="grid">{rank_rows}</table></details></figure>'),
             "<h3>Where the failures concentrate</h3>"]
    by = metrics.get("by_metadata") or {}
    if not by:
        parts.append("<p>No metadata columns to group by.</p>")
    for key, groups in by.items():
        svg = charts.to_svg(charts.metadata_chart(metrics, [key]), standalone=False)
        parts.append(f'<figure class="chart" data-key="{_e(key)}">{svg}{_breakdown_table(key, groups)}</figure>')
    parts.append("</section>")
    return "".join(parts)


# --------------------------------------------------------------------------- what to fix


def _fixes(metrics: dict) -> str:
    share = metrics.get("failure_share") or {}
    rows = [("<tr><th></th><th>stage</th><th>label</th><th>claims</th><th>share of failures</th>"
             "<th>concentrated in</th><th>what it means</th></tr>")]
    for i, label in enumerate(fix_order(metrics), 1):
        c = concentration(metrics, label)
        where = "no group stands out beyond noise" if c is None else _e(concentration_text(c))
        rows.append(f'<tr><td class="n">{i}</td><td>{_e(STAGES[label])}</td><td><span class="lab lab-{label}">'
                    f'{label}</span></td><td class="n">{metrics["labels"][label]["count"]}</td>'
                    f'<td class="n">{_pct(share.get(label))}</td><td>{where}</td><td>{_e(FIX_FOR[label])}</td></tr>')
    conflicts = metrics.get("source_conflicts", 0)
    extra = (f'<p><b>Corpus content</b>: {conflicts} correct claims repeat a passage that the reference '
             "answer contradicts (<code>source_conflict</code>): update or retire the outdated documents.</p>"
             if conflicts else "")
    chunker = chunker_line(metrics)
    if chunker:
        extra += f'<p><b>Chunking</b>: {_e(chunker)} The boundary is drawn inside each cut evidence below.</p>'
    return (f'<section id="fix"><h2>What to fix first</h2><table class="grid">{"".join(rows)}</table>{extra}'
            "</section>")


# --------------------------------------------------------------------------- drill-down


def _answer_html(answer: str, claims: list[dict], ids: dict[str, str], marks: list[dict] | None = None,
                 mark_ids: dict[int, str] | None = None) -> str:
    """The answer with each located claim's span as a link to the claim, coloured by label,
    and its answer spans marked inside it: an `unsupported` piece underlined (a link to
    the claim), a `contradicted` one struck through (a link to the evidence that says
    otherwise). Overlapping spans are split at every boundary; a piece takes its first
    claim's label."""
    located = []
    for d in claims:
        s, e = _int(d.get("answer_start")), _int(d.get("answer_end"))
        if s is not None and e is not None and 0 <= s < e <= len(answer):
            located.append((s, e, d))
    marked = [(int(m["answer_start"]), int(m["answer_end"]), i, m) for i, m in enumerate(marks or [])]
    cuts = sorted({0, len(answer), *(x for s, e, _ in located for x in (s, e)),
                   *(x for s, e, _, _ in marked for x in (s, e))})
    out = []
    for lo, hi in itertools.pairwise(cuts):
        covering = [d for s, e, d in located if s <= lo and hi <= e]
        piece = _e(answer[lo:hi])
        if not covering:
            out.append(piece)
            continue
        d = covering[0]
        more = " ".join(ids[c["claim_id"]] for c in covering)
        mark = next(((i, m) for s, e, i, m in marked if s <= lo and hi <= e), None)
        href, cls, title = f"#{ids[d['claim_id']]}", "", _e(d["label"])
        if mark is not None:
            i, m = mark
            cls = f" mk mk-{_e(m['kind'])}"
            if m["kind"] == "contradicted" and mark_ids and i in mark_ids:
                href = f"#{mark_ids[i]}"
                title += f" · contradicted by {_e(m.get('doc_id'))}: {_e(m.get('evidence_text'))}"
            else:
                title += f" · {_e(m['kind'])}: no evidence says this"
        out.append(f'<a class="as l-{_e(d["label"])}{cls}" href="{href}" data-claims="{more}" '
                   f'title="{title}">{piece}</a>')
    return "".join(out)


def _contradiction_html(m: dict, anchor: str, texts: Mapping[str, str]) -> str:
    """The evidence that says otherwise than a contradicted answer span, in its document."""
    doc_id, s, e = m["doc_id"], int(m["char_start"]), int(m["char_end"])
    doc = texts.get(doc_id, "")
    lo, hi = max(0, s - CONTEXT_CHARS), min(len(doc), e + CONTEXT_CHARS)
    return (f'<div class="ev contra" id="{anchor}"><p class="src"><b class="contra-tag">contradicts '
            f'&ldquo;{_e(m["text"])}&rdquo;</b> · <b>{_e(doc_id)}</b> · chars [{s}, {e})</p>'
            f'<pre class="doc">{"…" if lo else ""}{_e(doc[lo:s])}<mark class="contra" data-doc="{_e(doc_id)}" '
            f'data-start="{s}" data-end="{e}">{_e(doc[s:e])}</mark>{_e(doc[e:hi])}{"…" if hi < len(doc) else ""}'
            f"</pre></div>")


def _marks_line(marks: list[dict]) -> str:
    """The claim's answer spans in words (readable without colour)."""
    if not marks:
        return ""
    parts = [f'<span class="mk mk-{_e(m["kind"])}">{_e(m["text"])}</span> ({_e(m["kind"])})' for m in marks]
    return f'<p class="marks">not supported: {", ".join(parts)}</p>'


def _evidence_html(ev: dict, texts: Mapping[str, str], cutoff: int | None, decides: bool,
                   split_at: int | None = None) -> str:
    """One evidence span in its document; `split_at`: the chunk boundary that cuts it, drawn
    inside the highlight."""
    doc_id, s, e = ev["doc_id"], int(ev["char_start"]), int(ev["char_end"])
    doc = texts.get(doc_id, "")
    lo, hi = max(0, s - CONTEXT_CHARS), min(len(doc), e + CONTEXT_CHARS)
    rank = _int(ev.get("rank"))
    if rank is None:
        where = "not retrieved (corpus search)"
    elif ev.get("in_context") is True or ev.get("in_context") == 1:
        where = f"rank {rank} · in context"
    else:
        where = f"rank {rank} · retrieved, below the cutoff"
    if cutoff is not None and rank is not None:
        where += f" (cutoff {cutoff})"
    verdict = "" if _missing(ev.get("verdict")) else f' · {_e(ev["verdict"])}'
    if not _missing(ev.get("confidence")):
        verdict += f' {float(ev["confidence"]):.2f}'
    match = "" if _missing(ev.get("match")) else f' · {_e(ev["match"])} match'
    tag = '<b class="decides-tag">deciding evidence</b> · ' if decides else ""
    mark = (f'<mark class="ev{" decides" if decides else ""}" data-doc="{_e(doc_id)}" data-start="{s}" '
            f'data-end="{e}" data-claim="{_e(ev["claim_id"])}"{" data-decides" if decides else ""}>'
            f"{cut_evidence_html(doc, s, e, split_at, _e)}</mark>")
    return (f'<div class="ev{" decides" if decides else ""}"><p class="src">{tag}<b>{_e(doc_id)}</b> · chunk '
            f'{_e(ev.get("chunk_id"))} · {where}{verdict}{match} · chars [{s}, {e})</p>'
            f'<pre class="doc">{"…" if lo else ""}{_e(doc[lo:s])}{mark}{_e(doc[e:hi])}'
            f'{"…" if hi < len(doc) else ""}</pre></div>')


def _same_span(a: dict, b: dict) -> bool:
    return (a["doc_id"] == b["doc_id"] and _int(a["char_start"]) == _int(b["char_start"])
            and _int(a["char_end"]) == _int(b["char_end"]))


def _claim_evidence(d: dict, spans: list[dict], texts: Mapping[str, str], cutoff: int | None) -> str:
    deciding = d if isinstance(d.get("doc_id"), str) and not _missing(d.get("char_start")) else None
    ordered = sorted(spans, key=lambda s: (_VERDICT_ORDER.get(s.get("verdict"), 3), -(s.get("confidence") or 0),
                                           _int(s.get("rank")) or 10**9, s["doc_id"], int(s["char_start"])))
    found = None
    if deciding is not None:
        found = next((s for s in ordered if _same_span(s, deciding)), None)
    parts = []
    if deciding is not None:
        ev = found or {**deciding, "verdict": None, "claim_id": d["claim_id"]}
        parts.append(_evidence_html(ev, texts, cutoff, decides=True,
                                    split_at=_int(d.get("split_at")) if d.get("chunk_split") else None))
    others = [s for s in ordered if s is not found]
    if others:
        inner = "".join(_evidence_html(s, texts, cutoff, decides=False) for s in others)
        parts.append(f'<div class="more"><p class="k">other evidence the judge quoted ({len(others)})</p>{inner}</div>')
    if not parts:
        parts.append('<p class="none">no evidence span: nothing in the context, the retrieved chunks or '
                     "the corpus supports this claim</p>")
    return "".join(parts)


def _claims_section(metrics: dict, diagnoses: pd.DataFrame, answers: pd.DataFrame, corpus: pd.DataFrame,
                    spans: pd.DataFrame | None, questions: pd.DataFrame | None,
                    retrieved: pd.DataFrame | None, answer_spans: pd.DataFrame | None = None) -> str:
    texts = DocumentTexts(corpus)
    answer_of = dict(zip(answers["question_id"].tolist(), answers["answer"].tolist()))
    keys = list(metrics.get("by_metadata") or {})
    meta = _claim_meta(diagnoses, corpus, questions, retrieved, keys)  # groups need every claim
    ids = {cid: f"c-{i}" for i, cid in enumerate(diagnoses["claim_id"])}
    shown, note = shown_questions(diagnoses, MAX_DRILLDOWN_QUESTIONS)
    # Only the shown questions' rows become Python dicts: a dict per row of every table
    # cost ~40 KB of memory per answer at 10k answers, for cards never drawn.
    if note:  # some questions left out
        spans = None if spans is None else rows_of(spans, shown, diagnoses)
        answer_spans = None if answer_spans is None else rows_of(answer_spans, shown, diagnoses)
        questions = None if questions is None else rows_of(questions, shown, diagnoses)
        diagnoses = rows_of(diagnoses, shown, diagnoses)
    q_rows = {} if questions is None else {r["question_id"]: r for r in records(questions)}
    cutoffs: dict[str, int] = {}
    if retrieved is not None and len(retrieved):
        ctx = retrieved[retrieved["in_context"].astype(bool)]
        cutoffs = {q: int(r) for q, r in ctx.groupby("question_id")["rank"].max().items()}
    spans_of: dict[str, list[dict]] = {}
    if spans is not None:
        for s in records(spans):
            spans_of.setdefault(s["claim_id"], []).append(s)
    marks_of: dict[str, list[dict]] = {}
    for m in records(answer_spans) if answer_spans is not None else []:
        marks_of.setdefault(m["question_id"], []).append(m)
    by_question: dict[str, list[dict]] = {}
    for rec in records(diagnoses):  # one conversion, grouped in Python: 10k groups are slow in pandas
        by_question.setdefault(rec["question_id"], []).append(rec)
    cards = []
    for qi, qid in enumerate(shown):
        recs = by_question[qid]
        if "claim_index" in diagnoses.columns:
            recs.sort(key=lambda r: r["claim_index"])
        q = q_rows.get(qid, {})
        qmeta = " · ".join(f"{_e(k.split('.', 1)[1])}: {_e(q.get(k.split('.', 1)[1]))}" for k in keys
                           if k.startswith("question.") and k.split(".", 1)[1] in q)
        items = []
        q_marks = marks_of.get(qid, [])
        mark_ids = {i: f"x-{qi}-{i}" for i, m in enumerate(q_marks) if m["kind"] == "contradicted"
                    and not _missing(m.get("char_start"))}
        for d in recs:
            attrs = "".join(f' data-m{j}="{_e(meta[j][d["claim_id"]])}"' for j in range(len(keys)))
            flag = ' <span class="flag">source_conflict</span>' if d.get("source_conflict") else ""
            if d.get("chunk_split"):
                attrs += ' data-chunk-split="1"'
                flag += f' <span class="flag cutflag">chunk_split at {_int(d.get("split_at"))}</span>'
            p = d.get("support_probability")
            if d.get("uncertain"):
                attrs += ' data-uncertain="1"'
                flag += f' <span class="flag unc">uncertain · P(supported) {p:.2f}</span>'
            elif not _missing(p):
                flag += f' <span class="prob">P(supported) {p:.2f}</span>'
            ev = _claim_evidence(d, spans_of.get(d["claim_id"], []), texts, cutoffs.get(qid))
            mine = [(i, m) for i, m in enumerate(q_marks) if m["claim_id"] == d["claim_id"]]
            contra = "".join(_contradiction_html(m, mark_ids[i], texts) for i, m in mine if i in mark_ids)
            items.append(f'<li class="claim" id="{ids[d["claim_id"]]}" data-label="{_e(d["label"])}"{attrs}>'
                         f'<p class="ctext"><span class="lab lab-{_e(d["label"])}">{_e(d["label"])}</span>{flag} '
                         f'{_e(d["claim"])}</p><p class="why">{_e(d.get("reason"))}</p>'
                         f'{_marks_line([m for _, m in mine])}{contra}{ev}</li>')
        ref = q.get("reference_answer")
        ref_html = "" if _missing(ref) or not str(ref).strip() else (
            f'<details class="ref"><summary>reference answer</summary><p>{_e(ref)}</p></details>')
        cards.append(f'<article class="q" id="q-{qi}"><header><h3><span class="qid">{_e(qid)}</span> '
                     f'{_e(q.get("question", ""))}</h3>{f"<p class=meta>{qmeta}</p>" if qmeta else ""}</header>'
                     f'<div class="answer"><p class="k">answer</p><p>'
                     f'{_answer_html(str(answer_of.get(qid, "")), recs, ids, q_marks, mark_ids)}</p></div>{ref_html}'
                     f'<ol class="claims">{"".join(items)}</ol></article>')
    return (f'<section id="claims"><h2>Claims and their evidence</h2>{_filters(metrics, keys)}{note}'
            f'<p class="note">Each claim\'s answer span is coloured by its label; inside it, words no evidence '
            f'supports are <span class="mk mk-unsupported">underlined</span> and words the evidence contradicts '
            f'<span class="mk mk-contradicted">struck through</span> (click one to see what the corpus says). '
            f'Every evidence span the judge quoted is highlighted inside its document, the deciding one '
            f'outlined.</p>{"".join(cards)}</section>')


def _claim_meta(diagnoses: pd.DataFrame, corpus: pd.DataFrame, questions: pd.DataFrame | None,
                retrieved: pd.DataFrame | None, keys: list[str]) -> list[dict[str, str]]:
    """Per metadata key, claim_id → its group value, attributed as metrics["by_metadata"] is."""
    groups = claim_groups(diagnoses, corpus, questions, retrieved)
    return [dict(zip(groups["claim_id"], groups[key] if key in groups.columns else ["(none)"] * len(groups)))
            for key in keys]


def _filters(metrics: dict, keys: list[str]) -> str:
    labels = "".join(f'<option value="{_e(label)}">{_e(label)} ({v["count"]})</option>'
                     for label, v in metrics["labels"].items())
    selects = []
    for j, key in enumerate(keys):
        opts = "".join(f'<option value="{_e(v)}">{_e(v)}</option>' for v in metrics["by_metadata"][key])
        selects.append(f'<label>{_e(key)} <select data-key="m{j}"><option value="">all</option>{opts}'
                       "</select></label>")
    return (f'<form id="filters" class="filters" hidden><label>label <select id="f-label" name="label">'
            f'<option value="">all</option>{labels}</select></label>{"".join(selects)}'
            '<label>text <input id="f-text" type="search" placeholder="search claims, answers, documents">'
            f'</label><label><input id="f-uncertain" type="checkbox"> only uncertain ({metrics.get("uncertain", 0)})'
            '</label><button type="reset">reset</button> <output id="f-count"></output></form>')


# --------------------------------------------------------------------------- page

def render_report(metrics: dict, diagnoses: pd.DataFrame, answers: pd.DataFrame, corpus: pd.DataFrame, *,
                  spans: pd.DataFrame | None = None, questions: pd.DataFrame | None = None,
                  retrieved: pd.DataFrame | None = None, comparison: dict | None = None,
                  answer_spans: pd.DataFrame | None = None) -> str:
    """The whole page. `spans` (spans.parquet), `questions` and `retrieved` are optional:
    without them the drill-down shows only deciding spans, no question text, no cutoff."""
    middle = report_middle(metrics, diagnoses, answers, corpus, spans=spans, questions=questions,
                           retrieved=retrieved, comparison=comparison, answer_spans=answer_spans)
    return assemble_page(metrics, middle, comparison, diagnoses)


def report_middle(metrics: dict, diagnoses: pd.DataFrame, answers: pd.DataFrame, corpus: pd.DataFrame, *,
                  spans: pd.DataFrame | None = None, questions: pd.DataFrame | None = None,
                  retrieved: pd.DataFrame | None = None, comparison: dict | None = None,
                  answer_spans: pd.DataFrame | None = None) -> str:
    """Everything between the headline and the manifest: deltas, charts, what to fix, the
    claims. It reads no fact of the run itself (judge calls, manifest), so an unchanged
    re-run can take it as it was (tasks/reporting/snapshot.py)."""
    return "".join([
        _comparison(metrics, comparison),
        _charts(metrics, diagnoses, retrieved),
        _fixes(metrics),
        _claims_section(metrics, diagnoses, answers, corpus, spans, questions, retrieved, answer_spans),
    ])


def assemble_page(metrics: dict, middle: str, comparison: dict | None = None,
                  diagnoses: pd.DataFrame | None = None) -> str:
    """The page around `report_middle`: the headline (with the run's judge statistics) and
    the manifest. `diagnoses` is read only when `metrics` lacks its intervals."""
    script_hash = base64.b64encode(hashlib.sha256(PAGE_SCRIPT.encode("utf-8")).digest()).decode("ascii")
    csp = (f"default-src 'none'; script-src 'sha256-{script_hash}'; style-src 'unsafe-inline'; "
           "img-src data:; base-uri 'none'; form-action 'none'")
    run = _e(metrics["run"])
    manifest = _e(json.dumps(metrics.get("manifest") or {}, indent=1, sort_keys=True, ensure_ascii=False))
    body = "".join([
        _headline(metrics, diagnoses, comparison),
        middle,
        (f'<section id="manifest"><h2>Manifest</h2><details><summary>everything that produced these results'
         f"</summary><pre>{manifest}</pre></details></section>"),
    ])
    nav = "".join(f'<a href="#{a}">{t}</a>' for a, t in (("summary", "Headline"), ("charts", "Breakdown"),
                                                          ("fix", "What to fix"), ("claims", "Claims"),
                                                          ("manifest", "Manifest")))
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>ragspan report — {run}</title><style>{page_css()}</style></head>\n"
            f'<body><header><h1>ragspan — {run}</h1><p class="sub">why the answers of run {run} go wrong, '
            f"claim by claim</p><nav>{nav}</nav></header>\n{body}\n<script>{PAGE_SCRIPT}</script>\n</body></html>\n")
