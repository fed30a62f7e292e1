"""Evidence cut by a chunk boundary (issue 30): the rule's pure parts, then the real flow
(Prefect, the local judge, the openai judge over real HTTP) on one document chunked three
ways — whole, cut inside the evidence, and cut with an overlap that holds the evidence."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from ragspan.flows.cli import main
from ragspan.tasks.core import schemas
from ragspan.tasks.core.chunk_split import (
    Chunk,
    Layout,
    Seen,
    cut_at,
    gaps_between,
    label_of_split,
    reaches,
    window,
)
from ragspan.tasks.reporting.results_files import read_results

from benchmarks._support.fake_openai_server import FakeOpenAIServer

LEAD = "The Aral Sea lies in Central Asia, between Kazakhstan in the north and Uzbekistan in the south. "
EVIDENCE = ("The Aral Sea was once the fourth largest lake in the world, covering sixty-eight thousand "
            "square kilometres of open water.")
TAIL = (" Irrigation projects of the Soviet Union diverted the two rivers that fed it. By 2007 it had "
        "shrunk to a tenth of its original size, leaving fishing towns stranded far from the shore.")
DOC = LEAD + EVIDENCE + TAIL
EV_START = len(LEAD)
EV_END = EV_START + len(EVIDENCE)
CUT = DOC.index(" covering", EV_START)  # a space inside the evidence
OTHERS = {
    "tea": "Green tea is made from leaves that are not withered and oxidised. It is popular in Japan and China.",
    "rail": "The Trans-Siberian Railway connects Moscow with Vladivostok. It is the longest railway line in Russia.",
}


# ----------------------------------------------------------------------------- pure parts


def test_a_span_crossing_an_edge_is_cut_unless_one_chunk_holds_all_its_claim_words():
    a, b = Chunk("a", "d", 0, CUT), Chunk("b", "d", CUT, len(DOC))
    layout = Layout([a, b])
    span = (EV_START, EV_END, DOC[EV_START:EV_END])
    assert cut_at(EVIDENCE, span, a, layout) == CUT
    assert cut_at(EVIDENCE, span, b, layout) == CUT  # seen from the other side: the same boundary
    # a chunk that overlaps the other by the whole evidence holds it: nothing was cut
    healed = Layout([a, Chunk("b2", "d", EV_START, len(DOC))])
    assert cut_at(EVIDENCE, span, a, healed) is None
    # evidence inside one chunk crosses no edge of it
    whole = Chunk("w", "d", 0, len(DOC))
    assert cut_at(EVIDENCE, span, whole, Layout([whole])) is None
    # a quote running over the edge into words the claim does not have is not a cut
    over = (EV_START, CUT + 12, DOC[EV_START:CUT + 12])
    claim_in_a = DOC[EV_START:CUT]
    assert cut_at(claim_in_a, over, a, layout) is None


def test_a_quote_reaches_its_edge_across_spaces_punctuation_and_stopwords():
    text = "It rained in Paris on Monday, and the"
    end = text.index(",")
    assert reaches(text, end, len(text), forward=True)  # ", and the" holds no content word
    assert not reaches(text, text.index(" on"), len(text), forward=True)  # "Monday" is left out
    assert reaches(text, 0, 0, forward=False)


def test_neighbours_follow_document_order_and_skip_other_documents():
    chunks = [Chunk("x1", "x", 0, 10), Chunk("d2", "d", 50, 90), Chunk("d1", "d", 0, 50), Chunk("d3", "d", 80, 120)]
    layout = Layout(chunks)
    assert layout.before("d", 50, 90).chunk_id == "d1"
    assert layout.after("d", 50, 90).chunk_id == "d3"
    assert layout.before("d", 0, 50) is None and layout.after("x", 0, 10) is None
    assert [c.chunk_id for c in layout.overlapping("d", 45, 85)] == ["d1", "d2", "d3"]
    # an overlapping chunk that starts with this one and runs on past it follows it
    assert Layout([Chunk("a", "d", 0, 40), Chunk("b", "d", 0, 90)]).after("d", 0, 40).chunk_id == "b"


def test_a_failed_split_claim_takes_the_worst_placed_parts_label_and_a_supported_one_keeps_its_own():
    parts = [(10, 20), (20, 30)]
    in_ctx, below = (0, 20, True), (20, 40, False)
    assert label_of_split("hallucination", parts, [in_ctx, (20, 40, True)]) == "correct"
    assert label_of_split("synthesis_error", parts, [in_ctx, below]) == "rank_failure"
    assert label_of_split("hallucination", parts, [in_ctx]) == "retrieval_miss"
    assert label_of_split("correct", parts, [in_ctx]) == "correct"


# ----------------------------------------------------------------------------- the real flow


def _workspace(root: Path, chunks: list[tuple[int, int]], seen: int) -> Path:
    """One question whose answer is the evidence; it retrieves chunk `seen` of the document
    (in context) and one chunk of each other document; every other chunk is retrieved by nobody."""
    (root / "runs").mkdir(parents=True)
    corpus = [{"doc_id": "aral", "text": DOC}] + [{"doc_id": k, "text": v} for k, v in OTHERS.items()]
    rows = [{"chunk_id": f"aral#{i}", "doc_id": "aral", "char_start": s, "char_end": e}
            for i, (s, e) in enumerate(chunks)]
    rows += [{"chunk_id": f"{k}#0", "doc_id": k, "char_start": 0, "char_end": len(v)} for k, v in OTHERS.items()]
    run = {"question_id": "q1", "answer": EVIDENCE, "context_k": 3,
           "retrieved": [{"chunk_id": f"aral#{seen}"}, {"chunk_id": "tea#0"}, {"chunk_id": "rail#0"}]}
    for name, table in (("corpus", corpus), ("chunks", rows)):
        (root / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in table))
    (root / "questions.jsonl").write_text(json.dumps({"question_id": "q1", "question": "How big was the Aral Sea?"})
                                          + "\n")
    (root / "runs" / "r.jsonl").write_text(json.dumps(run) + "\n")
    return root


WHOLE = [(0, EV_START), (EV_START, len(DOC))]
SPLIT = [(0, CUT), (CUT, len(DOC))]
OVERLAP = [(0, CUT), (EV_START, len(DOC))]  # the second chunk holds the evidence whole


def _evaluate(data: Path, out: Path, *judge: str) -> pd.DataFrame:
    code = main(["evaluate", "--data", str(data), "--run", "r", "--out", str(out), "--quiet", *judge])
    assert code == 0
    return pd.read_parquet(out / "diagnoses.parquet")


@pytest.fixture(scope="module")
def three_chunkings(tmp_path_factory, prefect_server) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("chunkings")
    outs = {}
    for name, chunks, seen in (("whole", WHOLE, 1), ("split", SPLIT, 0), ("overlap", OVERLAP, 0)):
        outs[name] = root / f"out-{name}"
        _evaluate(_workspace(root / name, chunks, seen), outs[name])
    return outs


def test_evidence_cut_inside_is_flagged_at_the_boundary_with_exact_offsets(three_chunkings):
    d = schemas.Diagnoses.validate(pd.read_parquet(three_chunkings["split"] / "diagnoses.parquet")).iloc[0]
    assert bool(d["chunk_split"]) and int(d["split_at"]) == CUT
    # the part in context ends at the cut; the rest was never retrieved
    assert d["label"] == "retrieval_miss" and d["chunk_id"] == "aral#0"
    s, e = int(d["char_start"]), int(d["char_end"])
    assert s < CUT < e and DOC[s:e] == d["span_text"]
    assert DOC.encode()[int(d["byte_start"]):int(d["byte_end"])].decode() == d["span_text"]
    spans = pd.read_parquet(three_chunkings["split"] / "spans.parquet")
    assert ((spans["char_start"] == s) & (spans["char_end"] == e)).any()  # the report highlights it


def test_whole_evidence_and_evidence_an_overlap_holds_are_not_flagged(three_chunkings):
    whole = pd.read_parquet(three_chunkings["whole"] / "diagnoses.parquet").iloc[0]
    assert whole["label"] == "correct" and not whole["chunk_split"] and pd.isna(whole["split_at"])
    healed = pd.read_parquet(three_chunkings["overlap"] / "diagnoses.parquet").iloc[0]
    assert not healed["chunk_split"] and pd.isna(healed["split_at"])


def test_the_chunkers_share_reaches_metrics_summary_report_and_explain(three_chunkings, capsys):
    out = three_chunkings["split"]
    metrics = json.loads((out / "metrics.json").read_text())
    c = metrics["chunk_split"]
    assert c["claims"] == 1 and c["failures"] == 1 and c["share"] == 1.0 and c["by_label"] == {"retrieval_miss": 1}
    assert c["ci95"]["low"] == 1.0 and "by_metadata" in c
    assert read_results(out)["chunk_split"]["claims"] == 1
    assert "cut by a chunk boundary" in (out / "summary.md").read_text()
    page = (out / "report.html").read_text()
    assert f'data-split-at="{CUT}"' in page and "chunk_split at" in page
    capsys.readouterr()
    assert main(["explain", str(out), "q1:c0", "--color", "never"]) == 0
    text = capsys.readouterr().out
    assert "chunk split" in text and f"chunk boundary at {CUT}:" in text and "┃" in text
    assert json.loads((three_chunkings["whole"] / "metrics.json").read_text())["chunk_split"]["claims"] == 0


def test_the_gate_fails_a_change_that_cuts_evidence_and_passes_the_overlap_that_heals_it(three_chunkings, capsys):
    whole, split, overlap = (str(three_chunkings[k]) for k in ("whole", "split", "overlap"))
    assert main(["compare", whole, split, "--fail-on", "chunk-split:0"]) == 1
    assert "chunk boundary" in capsys.readouterr().out
    assert main(["compare", split, overlap, "--fail-on", "chunk-split:0,chunk-split:5pp"]) == 0
    assert main(["compare", whole, split, "--fail-on", "chunk-split:x"]) == 2


@pytest.mark.usefixtures("prefect_server", "state_dir")
def test_the_llm_judge_reads_the_joined_window_as_one_passage(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeOpenAIServer() as server:
        d = _evaluate(_workspace(tmp_path / "ws", SPLIT, 0), tmp_path / "out", "--judge", "openai",
                      "--model", "fake-model", "--base-url", server.url).iloc[0]
        joined = DOC[0:len(DOC)]
        windows = [r for r in server.requests if joined in json.dumps(r, ensure_ascii=False).replace("\\n", "\n")]
    assert bool(d["chunk_split"]) and int(d["split_at"]) == CUT and d["decided_by"] == "openai"
    assert DOC[int(d["char_start"]):int(d["char_end"])] == d["span_text"]
    assert windows, "no request carried the chunk joined with its neighbour as one passage"


def test_a_window_joins_across_a_dropped_separator_and_never_across_a_long_stretch():
    doc = "First part of the evidence\n\nsecond part of it." + " x" * 150 + "\n" + "z" * 300 + " tail text"
    a, b = (0, 26), (28, 46)
    far = (len(doc) - 9, len(doc))
    before, after = gaps_between([a[0], b[0], far[0]], [a[1], b[1], far[1]], doc)
    assert before == ["", "\n\n", None] and after == ["\n\n", None, ""]
    chunks = [Chunk("a", "d", *a), Chunk("b", "d", *b), Chunk("f", "d", *far)]
    text_of = {c.chunk_id: (doc[c.start:c.end], bg, ag) for c, bg, ag in zip(chunks, before, after)}
    seen = Seen("c", "q", "retrieved", chunks[0], 1, True, None, ("before", "after"))
    start, text = window(seen, Layout(chunks), text_of, doc[a[0]:a[1]])
    assert (start, text) == (0, doc[0:b[1]])  # the blank line between them is in the window
    last = Seen("c", "q", "retrieved", chunks[2], 1, True, None, ("before", "after"))
    assert window(last, Layout(chunks), text_of, doc[far[0]:far[1]]) is None  # 300+ unindexed characters
