"""`ragspan explain RESULTS ID`: one claim's diagnosis in the terminal — the claim, its
label and reason, the words no evidence supports marked in it, the deciding evidence with
the quote highlighted inside its document, and the other evidence the judge saw. ID is a
claim id (`q07:c1`) or a question id (every claim of that answer, the answer's marked
text first). The document text comes from the data directory the manifest names (found
as `ragspan compare` finds it); without it only the quotes are shown.

Marks in plain text (no colour needed): `[?words]` no evidence supports these words,
`[!words ≠ what the evidence says]` the evidence contradicts them."""

from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
from pathlib import Path

from ragspan.tasks.errors import UsageError

_BOLD_ON, _OFF = "\033[1;4m", "\033[0m"


def _missing(v) -> bool:
    """None or NaN (a missing value read from Parquet)."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def _mark(text: str, color: bool) -> str:
    return f"{_BOLD_ON}{text}{_OFF}" if color else f"«{text}»"


def in_context(doc_text: str, start: int, end: int, width: int, color: bool) -> str:
    """The quote with `width` characters either side, the quote highlighted."""
    left, right = max(0, start - width), min(len(doc_text), end + width)
    before = ("…" if left > 0 else "") + doc_text[left:start]
    after = doc_text[end:right] + ("…" if right < len(doc_text) else "")
    return _flat(before) + _mark(doc_text[start:end], color) + _flat(after)


def _flat(s: str) -> str:
    """Whitespace runs as one space (keeping a space at either edge)."""
    core = " ".join(s.split())
    return (" " if s[:1].isspace() else "") + core + (" " if s[-1:].isspace() and core else "")


def _evidence_line(row) -> str:
    where = "corpus-wide search (never retrieved)" if row["source"] == "corpus" else (
        f"rank {int(row['rank'])}, {'in context' if row['in_context'] else 'retrieved below the cutoff'}"
        if not _missing(row.get("rank")) else "retrieved")
    conf = "" if _missing(row.get("confidence")) else f" {row['confidence']:.2f}"
    span = "" if _missing(row.get("char_start")) else f"[{int(row['char_start'])}:{int(row['char_end'])}]"
    return f"{row['verdict']}{conf} · {row['doc_id']}{span} · chunk {row['chunk_id']} · {where}"


def with_marks(text: str, offset: int, marks: list[dict], color: bool) -> str:
    """`text` (which starts at `offset` in the answer) with its answer spans marked; a
    span that is not where its offsets say is left out (never a wrong mark)."""
    out, at = [], 0
    for m in sorted(marks, key=lambda m: int(m["answer_start"])):
        s, e = int(m["answer_start"]) - offset, int(m["answer_end"]) - offset
        if s < at or e > len(text) or text[s:e] != m["text"]:
            continue
        out.append(text[at:s])
        if m["kind"] == "contradicted":
            said = "" if _missing(m.get("evidence_text")) else f" ≠ {' '.join(str(m['evidence_text']).split())}"
            out.append(f"\033[1;31m[!{text[s:e]}{said}]{_OFF}" if color else f"[!{text[s:e]}{said}]")
        else:
            out.append(f"\033[4;31m[?{text[s:e]}]{_OFF}" if color else f"[?{text[s:e]}]")
        at = e
    out.append(text[at:])
    return "".join(out)


def marked_answer(claims_of_answer: list[dict], marks: list[dict], color: bool) -> str:
    """The answer's claims in order, each with its marks (what `explain QUESTION_ID` leads with)."""
    parts = []
    for c in claims_of_answer:
        a0 = c.get("answer_start")
        mine = [m for m in marks if m["claim_id"] == c["claim_id"]]
        parts.append(with_marks(c["claim"], int(a0), mine, color) if not _missing(a0) else c["claim"])
    return " ".join(parts)


def explain_claim(diag, spans, claims, texts: dict[str, str] | None, width: int, color: bool,
                  marks: list[dict] | None = None) -> str:
    out = []
    cid = diag["claim_id"]
    out.append(f"claim {cid} (question {diag['question_id']}, run {diag['run']})")
    a0 = diag.get("answer_start")
    shown = with_marks(diag["claim"], int(a0), marks or [], color) if marks and not _missing(a0) else diag["claim"]
    out.append(textwrap.indent(textwrap.fill(shown, 96), "  "))
    if marks:
        chars = diag.get("unsupported_chars")
        out.append(f"  not supported: {len(marks)} span(s)"
                   + ("" if _missing(chars) else f", {int(chars)} characters"
                      f" ({float(diag.get('unsupported_share') or 0):.0%} of the claim)"))
    question = claims.loc[claims["claim_id"] == cid, "question"]
    if len(question) and isinstance(question.iloc[0], str):
        out.append(f"  question: {question.iloc[0]}")
    flags = [f for f, on in (("uncertain", diag.get("uncertain")), ("source conflict", diag.get("source_conflict")),
                             ("chunk split", _is_split(diag))) if on]
    prob = diag.get("support_probability")
    prob_txt = f", P(supported) {prob:.2f}" if not _missing(prob) else ""
    out.append(f"label: {diag['label']}{prob_txt}" + (f"  [{', '.join(flags)}]" if flags else ""))
    out.append("reason: " + textwrap.fill(str(diag["reason"]), 96, subsequent_indent="  "))
    decided = diag.get("chunk_id")
    mine = spans[spans["claim_id"] == cid]
    is_deciding = (mine["chunk_id"] == decided) & (mine["char_start"] == diag.get("char_start"))
    if isinstance(decided, str) and decided:
        row = mine[is_deciding].iloc[0].to_dict() if is_deciding.any() else _deciding(diag)
        out.append(f"deciding evidence: {_evidence_line(row)}")
        out.append("  " + _quote(row, texts, width, color))
        if _is_split(diag) and not _missing(diag.get("split_at")):
            out.append("  " + _boundary(diag, texts, width))
        if isinstance(row.get("reason"), str) and row["reason"]:
            out.append(f"  judge: {row['reason']}")
    else:
        out.append("deciding evidence: none (no passage supports or is about the claim)")
    others = mine[~is_deciding]
    if len(others):
        out.append(f"other evidence ({len(others)}):")
        for _, row in others.iterrows():
            out.append(f"  - {_evidence_line(row.to_dict())}")
            out.append("    " + _quote(row.to_dict(), texts, max(20, width // 2), color))
            if isinstance(row.get("reason"), str) and row["reason"]:
                out.append(f"    judge: {row['reason']}")
    return "\n".join(out)


def _is_split(diag) -> bool:
    """Whether a chunk boundary cut the claim's evidence (False for results written before issue 30)."""
    v = diag.get("chunk_split")
    return not _missing(v) and bool(v)


def _boundary(diag, texts: dict[str, str] | None, width: int) -> str:
    """Where the chunk boundary cuts the evidence: `…left ┃ right…` around document offset split_at."""
    at, s, e = int(diag["split_at"]), int(diag["char_start"]), int(diag["char_end"])
    doc = (texts or {}).get(diag["doc_id"])
    if doc is None:
        return f"chunk boundary at {at}, inside the evidence [{s}, {e})"
    half = max(10, width // 2)
    left, right = " ".join(doc[max(s, at - half):at].split()), " ".join(doc[at:min(e, at + half)].split())
    return f"chunk boundary at {at}: …{left} ┃ {right}…"


def _deciding(diag) -> dict:
    keys = ("doc_id", "chunk_id", "char_start", "char_end", "rank", "in_context", "confidence", "match")
    d = {k: diag.get(k) for k in keys}
    d["source"] = diag.get("evidence_source") or "retrieved"
    d["verdict"] = "supported" if diag["label"] in ("correct", "rank_failure", "retrieval_miss") else "partial"
    return d


def _quote(row: dict, texts: dict[str, str] | None, width: int, color: bool) -> str:
    start, end = row.get("char_start"), row.get("char_end")
    if _missing(start) or _missing(end):
        return "(no quote)"
    text = (texts or {}).get(row.get("doc_id"))
    if text is None:
        return _mark(str(row.get("span_text") or ""), color)
    return in_context(text, int(start), int(end), width, color)


def cmd_explain(args: argparse.Namespace) -> int:
    import pandas as pd

    results = Path(args.results)
    if not (results / "diagnoses.parquet").is_file():
        raise UsageError(f"{results}: no diagnoses.parquet (is this a ragspan results directory?)")
    diagnoses = pd.read_parquet(results / "diagnoses.parquet")
    spans = pd.read_parquet(results / "spans.parquet")
    claims = pd.read_parquet(results / "claims.parquet")
    marked = results / "answer_spans.parquet"
    answer_spans = pd.read_parquet(marked) if marked.is_file() else None  # results before answer spans: none
    rows = diagnoses[diagnoses["claim_id"] == args.id]
    if not len(rows):
        rows = diagnoses[diagnoses["question_id"] == args.id]
    if not len(rows):
        near = sorted(i for i in set(diagnoses["question_id"]) if str(i).startswith(args.id[:2]))[:5]
        raise UsageError(f"{results}: no claim or question {args.id!r}"
                         + (f" (questions like it: {', '.join(near)})" if near else ""))
    texts = _document_texts(results, set(rows["doc_id"].dropna()) | set(spans.loc[spans["claim_id"].isin(rows["claim_id"]), "doc_id"]))
    color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    if args.json:
        records = []
        for _, d in rows.iterrows():
            records.append({"diagnosis": _plain(d.to_dict()),
                            "evidence": [_plain(r) for r in spans[spans["claim_id"] == d["claim_id"]].to_dict("records")],
                            "answer_spans": [_plain(r) for r in _marks_of(answer_spans, d["claim_id"])]})
        print(json.dumps(records, indent=2, ensure_ascii=False, default=str))
        return 0
    blocks = [explain_claim(d.to_dict(), spans, claims, texts, args.context, color,
                            _marks_of(answer_spans, d["claim_id"])) for _, d in rows.iterrows()]
    if len(rows) > 1 or args.id == rows["question_id"].iloc[0]:
        ordered = rows.sort_values("answer_start", na_position="last").to_dict("records")
        marks = [m for cid in rows["claim_id"] for m in _marks_of(answer_spans, cid)]
        blocks.insert(0, "answer (its claims in order; [?…] unsupported, [!… ≠ …] contradicted):\n"
                      + textwrap.indent(textwrap.fill(marked_answer(ordered, marks, color), 96), "  "))
    if texts is None:
        blocks.append("(document text not available: quotes shown without their context)")
    print(("\n\n").join(blocks))
    return 0


def _marks_of(answer_spans, claim_id: str) -> list[dict]:
    if answer_spans is None:
        return []
    return answer_spans[answer_spans["claim_id"] == claim_id].to_dict("records")


def _plain(d: dict) -> dict:
    return {k: (None if _missing(v) else v) for k, v in d.items()}


def _document_texts(results: Path, doc_ids: set) -> dict[str, str] | None:
    from ragspan.tasks.inputs.load import load_corpus
    from ragspan.tasks.reporting.compare_sides import data_dir_of_results
    from ragspan.tasks.reporting.results_files import read_results

    try:
        metrics = read_results(results)
        data_dir = data_dir_of_results(results, metrics.get("manifest") or {})
        if data_dir is None:
            return None
        corpus, _ = load_corpus(data_dir)
    except Exception:  # noqa: BLE001 - optional: the quotes alone are still shown
        return None
    keep = corpus[corpus["doc_id"].isin(doc_ids)]
    return dict(zip(keep["doc_id"], keep["text"]))


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "explain", help="one claim's diagnosis in the terminal: label, reason, evidence in context",
        description="Show the claim, its label and reason, the deciding evidence with the quote "
                    "highlighted in its document, and the other evidence the judge saw.")
    p.add_argument("results", metavar="RESULTS", help="a results directory (e.g. results/baseline)")
    p.add_argument("id", metavar="CLAIM_ID|QUESTION_ID",
                   help="a claim id (e.g. q07:c1) or a question id (every claim of its answer)")
    p.add_argument("--context", type=int, default=160, metavar="CHARS",
                   help="characters of the document shown either side of the quote (default 160)")
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                   help="highlight quotes with terminal bold/underline (auto: on a terminal), else «…»")
    p.add_argument("--json", action="store_true", help="print the diagnosis and its evidence as JSON")
    p.set_defaults(func=cmd_explain)
