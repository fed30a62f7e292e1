"""Pure rendering of report.html, the chart images and summary.md (no Prefect, no browser):
hostile corpus text stays text, every span is highlighted exactly, filters exist, images
are valid PNG/SVG of the expected size; plus the bootstrap intervals and the progress
reporters that feed the terminal."""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import re
import struct
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from ragspan.flows import progress
from ragspan.tasks.core import schemas
from ragspan.tasks.reporting import charts, report, stats

HOSTILE_DOC = "evil\"><script>alert('doc')</script>.md"
HOSTILE_TEXT = (
    "Intro <script>alert(\"x\")</script> and \"><img src=x onerror=alert(2)> then "
    "<a href=\"javascript:alert(3)\">click</a> & 'quotes' end.\r\nSecond line: café 東京 👍 costs $5."
)
PLAIN_TEXT = "Plain document. The Basic plan costs $5 per month.\nIt includes 2 seats."
HOSTILE_META = "<b onmouseover=alert(5)>faq</b>"
ANSWER = "The plan costs $5 <script>alert(7)</script>. It includes 2 seats. Unlocated \"claim\"."


def _find(doc: str, needle: str) -> tuple[int, int]:
    s = doc.index(needle)
    return s, s + len(needle)


def hostile_inputs() -> dict:
    """A run over a corpus, questions and answers full of HTML: every table the report reads."""
    corpus = pd.DataFrame({
        "doc_id": [HOSTILE_DOC, "plain.md"],
        "text": [HOSTILE_TEXT, PLAIN_TEXT],
        "doc_type": [HOSTILE_META, "manual"],
    })
    questions = pd.DataFrame({
        "question_id": ['q"1', "q2"],
        "question": ["<img src=x onerror=alert(6)> what?", "How many seats?"],
        "reference_answer": ["<script>alert(8)</script>", None],
        "topic": ["billing", "<i>seats</i>"],
    })
    answers = pd.DataFrame({"run": "r", "question_id": ['q"1', "q2"], "answer": [ANSWER, "Two seats."],
                            "claims": [None, None]})
    retrieved = pd.DataFrame({
        "run": "r", "question_id": ['q"1', 'q"1', "q2"], "rank": [1, 2, 1],
        "chunk_id": [f"{HOSTILE_DOC}#0", "plain.md#0", "plain.md#0"],
        "doc_id": [HOSTILE_DOC, "plain.md", "plain.md"], "char_start": [0, 0, 0],
        "char_end": [len(HOSTILE_TEXT), len(PLAIN_TEXT), len(PLAIN_TEXT)], "score": [0.9, 0.8, 0.7],
        "in_context": [True, False, True],
    })
    s1 = _find(HOSTILE_TEXT, "<script>alert(\"x\")</script>")
    s2 = _find(HOSTILE_TEXT, "\"><img src=x onerror=alert(2)>")
    s3 = _find(HOSTILE_TEXT, "end.\r\nSecond line: café 東京 👍")
    s4 = _find(PLAIN_TEXT, "The Basic plan costs $5 per month.")
    s5 = _find(PLAIN_TEXT, "It includes 2 seats.")
    a1 = _find(ANSWER, "The plan costs $5 <script>alert(7)</script>.")
    a2 = _find(ANSWER, "It includes 2 seats.")
    span_rows = [
        ('q"1:c0', "retrieved", f"{HOSTILE_DOC}#0", HOSTILE_DOC, *s1, 1, True, "partial", 0.5),
        ('q"1:c0', "retrieved", f"{HOSTILE_DOC}#0", HOSTILE_DOC, *s3, 1, True, "partial", 0.4),
        ('q"1:c0', "retrieved", "plain.md#0", "plain.md", *s4, 2, False, "supported", 1.0),
        ('q"1:c1', "retrieved", f"{HOSTILE_DOC}#0", HOSTILE_DOC, *s2, 1, True, "supported", 0.9),
        ("q2:c0", "retrieved", "plain.md#0", "plain.md", *s5, 1, True, "supported", 1.0),
    ]
    docs = dict(zip(corpus["doc_id"], corpus["text"]))
    spans = schemas.Spans.validate(pd.DataFrame([
        {"claim_id": c, "source": src, "chunk_id": ch, "doc_id": d, "char_start": s, "char_end": e,
         "span_text": docs[d][s:e], "match": "exact", "rank": r, "in_context": ic, "score": 0.9,
         "verdict": v, "confidence": conf, "reason": "<b>why</b>"}
        for c, src, ch, d, s, e, r, ic, v, conf in span_rows]))

    def diag(qid, cid, claim, a, label, span=None, **kw):
        row = {"run": "r", "question_id": qid, "claim_id": cid, "claim": claim,
               "answer_start": a[0] if a else None, "answer_end": a[1] if a else None, "label": label,
               "doc_id": None, "chunk_id": None, "char_start": None, "char_end": None, "span_text": None,
               "rank": None, "in_context": None, "score": None, "reason": "because <script>alert(9)</script>",
               "source_conflict": False, "evidence_source": None, "match": None, "confidence": None,
               "support_probability": None, "uncertain": False, "decided_by": "local"}
        if span is not None:
            sp = spans.iloc[span]
            row.update({"doc_id": sp["doc_id"], "chunk_id": sp["chunk_id"], "char_start": sp["char_start"],
                        "char_end": sp["char_end"], "span_text": sp["span_text"], "rank": sp["rank"],
                        "in_context": sp["in_context"], "score": sp["score"], "evidence_source": "retrieved",
                        "match": "exact", "confidence": sp["confidence"]})
        row.update(kw)
        return row

    diagnoses = schemas.Diagnoses.validate(pd.DataFrame([
        diag('q"1', 'q"1:c0', ANSWER[a1[0]:a1[1]], a1, "rank_failure", span=2),
        diag('q"1', 'q"1:c1', ANSWER[a2[0]:a2[1]], a2, "correct", span=3, source_conflict=True),
        diag('q"1', 'q"1:c2', "Unlocated <claim>", None, "hallucination"),
        diag("q2", "q2:c0", "Two seats.", (0, 10), "correct", span=4, support_probability=0.58, uncertain=True),
        diag("q2", "q2:c1", "👍👍", None, "unjudged"),
    ]))
    metrics = report.metrics_for("r", diagnoses, corpus, questions, retrieved, {"judge": "local", "calls": 3},
                                 {"judge": {"kind": "local"}, "inputs_md5": {"corpus.jsonl": "abc"}})
    return {"metrics": metrics, "diagnoses": diagnoses, "answers": answers, "corpus": corpus,
            "spans": spans, "questions": questions, "retrieved": retrieved}


def render_hostile(comparison: dict | None = None) -> tuple[str, dict]:
    i = hostile_inputs()
    page = report.render_html(i["metrics"], i["diagnoses"], i["answers"], i["corpus"], spans=i["spans"],
                              questions=i["questions"], retrieved=i["retrieved"], comparison=comparison)
    return page, i


def write_hostile_report(path: Path) -> dict:
    page, inputs = render_hostile()
    path.write_text(page, encoding="utf-8")
    return inputs


class Marks(HTMLParser):
    """Collects every <mark class="ev"> with its attributes and (unescaped) text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.marks: list[dict] = []
        self._open: dict | None = None
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "mark" and "ev" in (a.get("class") or "").split():
            self._open = {**a, "text": ""}

    def handle_data(self, data):
        if self._open is not None:
            self._open["text"] += data

    def handle_endtag(self, tag):
        if tag == "mark" and self._open is not None:
            self.marks.append(self._open)
            self._open = None


def parsed(page: str) -> Marks:
    p = Marks()
    p.feed(page)
    p.close()
    return p


# --------------------------------------------------------------------------- report.html


def test_hostile_text_is_escaped_everywhere():
    page, _ = render_hostile()
    assert page.count("<script") == 1  # ours, at the end
    for raw in ("<script>alert", "<img src=x", "<b onmouseover", "<a href=\"javascript", "<i>seats</i>"):
        assert raw not in page, raw
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert "javascript:alert(3)" in page  # shown, as text
    tags = parsed(page).tags
    assert not [t for t, a in tags if t in ("img", "iframe", "object", "embed", "i")]
    assert not [a for _, a in tags if any(k.startswith("on") for k in a)]
    assert not [a for _, a in tags if any("javascript:" in (v or "") for k, v in a.items() if k in ("href", "src"))]


def test_csp_allows_only_the_report_script():
    page, _ = render_hostile()
    script = re.search(r"<script>(.*?)</script>", page, re.DOTALL).group(1)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert f"script-src 'sha256-{digest}'" in csp and "default-src 'none'" in csp
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "") and "https://" not in page


def test_one_mark_per_span_with_the_exact_corpus_text():
    page, i = render_hostile()
    marks = parsed(page).marks
    assert len(marks) == len(i["spans"])
    texts = dict(zip(i["corpus"]["doc_id"], i["corpus"]["text"]))
    for m in marks:
        assert m["text"] == texts[m["data-doc"]][int(m["data-start"]):int(m["data-end"])]
    got = {(m["data-claim"], m["data-doc"], int(m["data-start"]), int(m["data-end"])) for m in marks}
    want = set(zip(i["spans"]["claim_id"], i["spans"]["doc_id"], i["spans"]["char_start"], i["spans"]["char_end"]))
    assert got == want
    assert any("\r\n" in m["text"] for m in marks)  # CRLF survives the HTML parser
    deciding = [m for m in marks if "data-decides" in m]
    assert len(deciding) == i["diagnoses"]["char_start"].notna().sum() == 3


def test_answer_spans_link_to_their_claims_coloured_by_label():
    page, _ = render_hostile()
    tags = parsed(page).tags
    spans = [a for t, a in tags if t == "a" and "as" in (a.get("class") or "").split()]
    assert {a["class"] for a in spans} == {"as l-rank_failure", "as l-correct"}
    ids = {a["id"] for t, a in tags if t == "li" and a.get("id")}
    assert all(a["href"][1:] in ids for a in spans)


def test_filters_headline_fixes_and_charts_are_present():
    page, i = render_hostile()
    tags = parsed(page).tags
    form = [a for t, a in tags if t == "form"]
    assert form and form[0]["id"] == "filters" and "hidden" in form[0]  # shown by the script only
    options = {a.get("value") for t, a in tags if t == "option"}
    assert set(schemas.LABELS) <= options and HOSTILE_META in options
    assert any(t == "select" and a.get("data-key") == "m0" for t, a in tags)
    assert any(t == "input" and a.get("id") == "f-text" for t, a in tags)
    claims = [a for t, a in tags if t == "li" and "claim" in (a.get("class") or "")]
    assert len(claims) == len(i["diagnoses"])
    assert {a["data-m0"] for a in claims} >= {HOSTILE_META, "manual"}
    assert "What to fix first" in page and "95% CI" in page and "unjudged" in page
    assert page.count("<svg") == 2 + len(i["metrics"]["by_metadata"])
    order = [page.index(f'<span class="lab lab-{label}">{label}</span></td><td class="n">')
             for label in ("rank_failure", "hallucination")]
    assert order == sorted(order)  # both 1 failure: the fixed order breaks the tie


def test_comparison_deltas_are_rendered():
    comparison = {
        "a": {"name": "main<script>", "run": "r", "git_rev": "abc"}, "b": {"name": "pr", "run": "r"},
        "overall": [{"label": "correct", "a_rate": 0.5, "b_rate": 0.55, "delta": 0.05, "ci_low": 0.01,
                     "ci_high": 0.09, "within_noise": False}],
        "transitions": {"changed": [{"from": "rank_failure", "to": "correct", "count": 3}]},
        "worse": [],
    }
    page, _ = render_hostile(comparison)
    assert "Δ vs main&lt;script&gt;" in page and "+5.0 pp" in page and "<b>changed</b>" in page
    assert "3 claims" in page and page.count("<script") == 1


# --------------------------------------------------------------------------- images, summary.md


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_chart_images_are_valid_png_and_svg_of_the_expected_size():
    i = hostile_inputs()
    images = report.chart_images(i["metrics"], i["diagnoses"], i["retrieved"])
    assert set(images) == {f"{n}.{ext}" for n in report.CHART_FILES for ext in ("png", "svg")}
    built = {"taxonomy": charts.taxonomy_chart(i["metrics"]), "by_metadata": charts.metadata_chart(i["metrics"]),
             "ranks": charts.rank_chart(charts.evidence_positions(i["diagnoses"], i["retrieved"]), "r")}
    for name, chart in built.items():
        root = ET.fromstring(images[f"{name}.svg"])
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        height = charts.layout(chart).height
        assert (root.get("width"), root.get("height")) == (str(charts.WIDTH), str(height))
        assert _png_size(images[f"{name}.png"]) == (charts.WIDTH * charts.PNG_SCALE, height * charts.PNG_SCALE)
        from PIL import Image

        Image.open(io.BytesIO(images[f"{name}.png"])).verify()
    svg = images["by_metadata.svg"].decode()
    assert HOSTILE_META not in svg and "&lt;b onmouseover=alert(5)&gt;faq&lt;/b&gt;" in svg


def test_evidence_positions_are_relative_to_the_cutoff():
    i = hostile_inputs()
    pos = {p.key: p.count for p in charts.evidence_positions(i["diagnoses"], i["retrieved"])}
    # q"1: cutoff 1; rank_failure at rank 2 → 1 below, correct at rank 1; q2 correct at rank 1
    assert pos == {"rank1": 2, "offset+1": 1, "corpus": 0, "none": 1}


def test_summary_markdown_has_the_headline_fixes_and_images():
    i = hostile_inputs()
    metrics = {**i["metrics"], "rate_ci95": stats.rate_intervals(i["diagnoses"]), "bootstrap": stats.bootstrap_spec()}
    md = report.summary_markdown(metrics, images=("taxonomy.png", "ranks.png"))
    assert md.startswith("## ragspan: r\n")
    assert "| label | claims | rate | 95% CI |" in md
    for label in schemas.LABELS:
        assert f"| {label} | {metrics['labels'][label]['count']} |" in md
    assert "### What to fix first" in md and "1. **" in md and "![taxonomy.png](taxonomy.png)" in md
    assert "<b" not in md and "<script" not in md


# --------------------------------------------------------------------------- stats


def test_bootstrap_intervals_are_seeded_and_cover_the_rate():
    i = hostile_inputs()
    a, b = stats.rate_intervals(i["diagnoses"]), stats.rate_intervals(i["diagnoses"])
    assert a == b and set(a) == set(stats.JUDGED_LABELS)
    big = pd.DataFrame({"question_id": [f"q{k // 3}" for k in range(300)],
                        "label": ["correct", "correct", "hallucination"] * 100})
    ci = stats.rate_intervals(big, resamples=500)
    assert ci["correct"]["low"] == ci["correct"]["high"] == pytest.approx(2 / 3, abs=1e-4)
    mixed = pd.DataFrame({"question_id": [f"q{k}" for k in range(60)],
                          "label": ["correct"] * 30 + ["rank_failure"] * 30})
    ci = stats.rate_intervals(mixed, resamples=500)["correct"]
    assert ci["low"] < 0.5 < ci["high"] and ci["high"] - ci["low"] < 0.4
    assert stats.rate_intervals(big.iloc[:0])["correct"] == {"low": None, "high": None}


# --------------------------------------------------------------------------- progress


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _drive(p: progress.Progress, clock: Clock) -> None:
    p.start("base", answers=10, shards=2)
    for shard in range(2):
        p.step_started("decompose", 5)
        clock.t += 2
        p.step_done("decompose", "Completed", 5)
        p.step_started("extract")
        p.judge_calls(3)
        clock.t += 3
        p.step_done("extract", "Completed", 10)
        p.step_done("diagnose", "Completed", 0)
        p.shard_done()
        if shard == 0:
            assert p.eta() == pytest.approx(5.0) and p.rate() == pytest.approx(3.0)
    p.done(30, {"correct": 30})


def test_jsonl_progress_reports_counts_rate_and_eta():
    out, clock = io.StringIO(), Clock()
    p = progress.JsonlProgress(out)
    p.clock = clock
    _drive(p, clock)
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["event"] for e in events][:2] == ["start", "step"] and events[-1]["event"] == "done"
    shards = [e for e in events if e["event"] == "shard"]
    assert [e["answers_done"] for e in shards] == [5, 10]
    assert shards[0]["eta_s"] == 5.0 and shards[0]["calls_per_s"] == 3.0 and shards[1]["eta_s"] == 0.0
    assert events[-1]["judge_calls"] == 30


def test_plain_and_bar_progress():
    out, clock = io.StringIO(), Clock()
    p = progress.LineProgress(out)
    p.clock = clock
    _drive(p, clock)
    lines = out.getvalue().splitlines()
    assert lines[0] == "evaluate base: 10 answers in 2 shards" and len(lines) == 4
    assert "1/2 shards · 5/10 answers" in lines[1] and "(3.0/s)" in lines[1] and "ETA 00:05" in lines[1]
    out, clock = io.StringIO(), Clock()
    bar = progress.BarProgress(out, clock=clock)
    _drive(bar, clock)
    assert out.getvalue().startswith("\revaluate base [") and out.getvalue().endswith("\n")
    assert "█" * 24 in out.getvalue()
    assert isinstance(progress.make("auto", io.StringIO()), progress.LineProgress)
    assert type(progress.make("none")) is progress.Progress
    with progress.activate(progress.JsonlProgress(io.StringIO())) as active:
        assert progress.current() is active
    assert type(progress.current()) is progress.Progress


def test_cli_accepts_progress_modes():
    from ragspan.flows.cli import build_parser

    args = build_parser().parse_args(["evaluate", "--progress", "jsonl"])
    assert args.progress == "jsonl"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["evaluate", "--progress", "fancy"])


def test_huge_runs_show_the_questions_with_most_failures(monkeypatch):
    from ragspan.tasks.reporting import html as report_html

    monkeypatch.setattr(report_html, "MAX_DRILLDOWN_QUESTIONS", 1)
    page, i = render_hostile()
    failing = i["diagnoses"].loc[~i["diagnoses"]["label"].isin(["correct", "unjudged"]), "question_id"]
    shown = failing.value_counts().index[0]
    assert "Showing the 1 of 2 questions with the most failures" in page
    assert page.count('<article class="q"') == 1
    assert html.escape(shown, quote=True) in page


def test_uncertain_claims_are_counted_flagged_and_filterable():
    page, i = render_hostile()
    assert i["metrics"]["uncertain"] == 1
    assert page.count('data-uncertain="1"') == 1
    assert "uncertain · P(supported) 0.58" in page
    assert 'id="f-uncertain"' in page and "only uncertain (1)" in page


def test_a_capped_drill_down_draws_its_cards_exactly_as_the_full_one(monkeypatch):
    """Only the shown questions' rows are turned into dicts; a card must not notice."""
    from ragspan.tasks.reporting import html as report_html

    full, _ = render_hostile()
    monkeypatch.setattr(report_html, "MAX_DRILLDOWN_QUESTIONS", 1)
    capped, _ = render_hostile()

    def cards(page: str) -> list[str]:  # the card's position in the page (q-N, x-N-i) aside
        found = re.findall(r'<article class="q".*?</article>', page, flags=re.DOTALL)
        return [re.sub(r'"(q|x)-\d+', r'"\1-N', c) for c in found]

    (shown,) = cards(capped)
    assert shown in cards(full)
    assert len(cards(full)) == 2


def test_bootstrap_sums_in_blocks_equal_the_whole_weight_matrix():
    """resampled_sums never holds resamples × questions weights, yet gives the same sums
    bit for bit (integers in float64), over several blocks of resamples."""
    import numpy as np

    rng = np.random.default_rng(5)
    counts = rng.integers(0, 7, size=(30_000, 4)).astype(float)  # 2M // 30k = 66 rows a block
    whole = stats.question_weights(len(counts), 150, seed=2) @ counts
    assert np.array_equal(stats.resampled_sums(counts, 150, seed=2), whole)
    assert not np.array_equal(stats.resampled_sums(counts, 150, seed=3), whole)
    assert stats.resampled_sums(counts[:0], 10).shape == (10, 4)
