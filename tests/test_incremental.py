"""A run after an index rebuild judges only what the rebuild can reach, and its results are
those of a cold run on the new corpus (tasks/judges/verdict_cache.py, docs/decisions.md #40).

One state dir goes through a chain of corpus changes — documents edited, added, removed, a
document re-chunked, chunk ids renamed over the same text — with the real Prefect flow and
the real local judge. After each change the run's tables and metrics are compared with a
cold run of the same data in a fresh state dir, and the (claim, passage) pairs the local
judge was asked about are recorded (the verifier runs as usual; the test only listens):
the incremental run must judge exactly the pairs the new corpus needs that no earlier run
judged, and run.json's `pairs_judged` must count them. Answers none of whose inputs a change
reaches are reused whole from the answer store; the others whose retrieved passages the
change left alone start at corpus-wide search, their claims and retrieved-passage verdicts
from the store (run.json's `answers_resumed` counts them, docs/decisions.md #58, #67) — and
the results are still the cold run's."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from conftest import SAMPLE
from ragspan.tasks.judges.verifier import Verifier
from ragspan.tasks.reporting.matching import matched_claims

pytestmark = pytest.mark.usefixtures("prefect_server")

TABLES = ("claims", "spans", "diagnoses", "answer_spans")
PARAMS = "pipeline:\n  judge_processes: 1\n"  # in-process, so the test hears every pair
CUT_AT = " thousand"


class PairLog:
    """Every (claim, passage, question, whole answer) the verifier is asked to judge."""

    def __init__(self) -> None:
        self.pairs: Counter[tuple] = Counter()

    @contextlib.contextmanager
    def listening(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
        real = Verifier.rows

        def rows(verifier: Verifier, items, competing=None):
            for claim, passages, question, whole in items:
                self.pairs.update((claim, p, question or "", whole) for p in passages)
            return real(verifier, items, competing)

        with monkeypatch.context() as m:
            m.setattr(Verifier, "rows", rows)
            yield


def run_evaluate(data: Path, out: Path, params: Path) -> dict:
    from ragspan.flows.evaluate import evaluate

    return evaluate(data_dir=str(data), run="baseline", out_dir=str(out), params_path=str(params))


@contextlib.contextmanager
def fresh_state(where: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A state dir with nothing in it: no index, answers, verdicts or Prefect step results."""
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings

    with monkeypatch.context() as m, temporary_settings({PREFECT_RESULTS_LOCAL_STORAGE_PATH: str(where / "results")}):
        m.setenv("RAGSPAN_HOME", str(where))
        yield


# ---------------------------------------------------------------- the corpus changes


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def edit_documents(data: Path) -> None:
    """One sentence appended to two documents; their last chunk grows to cover it."""
    docs, chunks = _read(data / "corpus.jsonl"), _read(data / "chunks.jsonl")
    for doc_id in ("release-notes/postgres-16.md", "faq/database.md"):
        doc = next(d for d in docs if d["doc_id"] == doc_id)
        doc["text"] += " Support for this was reviewed again in December."
        last = max((c for c in chunks if c["doc_id"] == doc_id), key=lambda c: c["char_end"])
        last["char_end"] = len(doc["text"])
    _write(data / "corpus.jsonl", docs)
    _write(data / "chunks.jsonl", chunks)


ADDED = "policies/tokyo-pricing.md"


def add_document(data: Path) -> None:
    """A new document of two chunks stating what two hallucinated claims say: no answer
    retrieves it, the corpus-wide search finds it (hallucination → retrieval_miss)."""
    expected = pd.read_csv(data / "expected_labels.csv")
    first, second = expected.loc[expected["label"] == "hallucination", "claim"].head(2)
    text = f"{first}\n\n{second}"
    docs, chunks = _read(data / "corpus.jsonl"), _read(data / "chunks.jsonl")
    docs.append({**{k: v for k, v in docs[0].items() if k not in ("doc_id", "text")}, "doc_id": ADDED, "text": text,
                 "title": "Tokyo pricing"})
    chunks += [{"chunk_id": f"{ADDED}#0", "doc_id": ADDED, "char_start": 0, "char_end": len(first)},
               {"chunk_id": f"{ADDED}#1", "doc_id": ADDED, "char_start": len(first) + 2, "char_end": len(text)}]
    _write(data / "corpus.jsonl", docs)
    _write(data / "chunks.jsonl", chunks)


def remove_document(data: Path) -> None:
    """The document add_document added goes again (no answer retrieved it)."""
    _write(data / "corpus.jsonl", [d for d in _read(data / "corpus.jsonl") if d["doc_id"] != ADDED])
    _write(data / "chunks.jsonl", [c for c in _read(data / "chunks.jsonl") if c["doc_id"] != ADDED])


RECHUNKED = "faq/billing.md"


def rechunk_document(data: Path) -> None:
    """A document cut anew: three chunks at other boundaries, none with an old chunk's text."""
    docs, chunks = _read(data / "corpus.jsonl"), _read(data / "chunks.jsonl")
    text = next(d for d in docs if d["doc_id"] == RECHUNKED)["text"]
    old = sorted((c for c in chunks if c["doc_id"] == RECHUNKED), key=lambda c: c["char_start"])
    p = text.index(" ", (old[0]["char_start"] + old[0]["char_end"]) // 2)
    q = text.index(" ", (old[1]["char_start"] + old[1]["char_end"]) // 2)
    cuts = [(0, p), (p + 1, q), (q + 1, old[-1]["char_end"])]
    new = [{"chunk_id": f"{RECHUNKED}#{i}", "doc_id": RECHUNKED, "char_start": s, "char_end": e}
           for i, (s, e) in enumerate(cuts)]
    _write(data / "chunks.jsonl", [c for c in chunks if c["doc_id"] != RECHUNKED] + new)


RENAMED = "manuals/networking/load-balancers.md"


def rename_chunks(data: Path) -> None:
    """The chunks of a document get new ids over the same text; the run refers to the new ids."""
    chunks = _read(data / "chunks.jsonl")
    renamed = {c["chunk_id"]: c["chunk_id"].replace("#", "/part-") for c in chunks if c["doc_id"] == RENAMED}
    for c in chunks:
        c["chunk_id"] = renamed.get(c["chunk_id"], c["chunk_id"])
    runs = _read(data / "runs" / "baseline.jsonl")
    for a in runs:
        for item in a["retrieved"]:
            if item.get("chunk_id") in renamed:
                item["chunk_id"] = renamed[item["chunk_id"]]
    _write(data / "chunks.jsonl", chunks)
    _write(data / "runs" / "baseline.jsonl", runs)


CHANGES = (edit_documents, add_document, remove_document, rechunk_document, rename_chunks)
# the documents each change edits, re-chunks or renames the chunks of (none an answer cites
# for add_document and remove_document)
TOUCHED = {edit_documents: {"release-notes/postgres-16.md", "faq/database.md"}, add_document: set(),
           remove_document: set(), rechunk_document: {RECHUNKED}, rename_chunks: {RENAMED}}


def answers_citing(data: Path, documents: set[str]) -> set[str]:
    """Question ids of the answers with a retrieved passage from one of `documents`."""
    doc_of = {c["chunk_id"]: c["doc_id"] for c in _read(data / "chunks.jsonl")}
    return {a["question_id"] for a in _read(data / "runs" / "baseline.jsonl")
            if any(doc_of.get(item.get("chunk_id")) in documents for item in a["retrieved"])}


# ---------------------------------------------------------------- the test


def _assert_same_results(a: Path, b: Path) -> None:
    for name in TABLES:
        pd.testing.assert_frame_equal(pd.read_parquet(a / f"{name}.parquet"), pd.read_parquet(b / f"{name}.parquet"),
                                      obj=name)
    assert json.loads((a / "metrics.json").read_text()) == json.loads((b / "metrics.json").read_text())


def _assert_rebuild_told(out: Path, before: pd.DataFrame, metrics: dict, change) -> None:
    """run.json, summary.md and the view name the claims whose label the rebuild moved."""
    after = pd.read_parquet(out / "diagnoses.parquet")
    both, _, _ = matched_claims(before, after)  # as `ragspan compare` matches them
    moved = both[both["label_a"] != both["label_b"]]
    expected = Counter(f"{b} → {a}" for b, a in zip(moved["label_a"], moved["label_b"]))
    told = json.loads((out / "run.json").read_text())["rebuild"]
    assert told == metrics["rebuild"]
    assert told["transitions"] == dict(expected) and told["claims_compared"] == len(both) == len(after)
    assert told["also_changed"] == (["run file"] if change is rename_chunks else [])
    summary = (out / "summary.md").read_text()
    assert "What the index rebuild changed" in summary
    assert all(f"| {t.replace('_', chr(92) + '_')} | {n} |" in summary for t, n in expected.items())  # _ escaped
    assert all(f"`{c}`" in summary for c in moved["claim_id_b"])
    if change is add_document:  # the new document holds two hallucinated claims
        assert expected["hallucination → retrieval_miss"] == 2
    if change is remove_document:
        assert expected["retrieval_miss → hallucination"] == 2


def _assert_reused_whole(metrics: dict, change, answers: int) -> None:
    """Answers whose inputs the change left alone — their passages, their documents, and no
    claim that searched the corpus — come from the answer store whole (docs/decisions.md
    #52); those that searched are evaluated again, since every change here moves BM25's
    statistics. Back on an earlier corpus (remove_document undoes add_document), the
    answers that searched it are found under that corpus's key."""
    reused = metrics["judge"]["answers_reused"]
    if change is remove_document:
        assert reused == answers, change.__name__
    else:
        assert 0 < reused < answers, change.__name__


def passage_rows(data: Path) -> dict[str, list[tuple]]:
    """Per answer, what its retrieved passages are: chunk id, document, start and text."""
    text_of = {d["doc_id"]: d["text"] for d in _read(data / "corpus.jsonl")}
    chunk = {c["chunk_id"]: (c["chunk_id"], c["doc_id"], c["char_start"],
                             text_of.get(c["doc_id"], "")[c["char_start"]:c["char_end"]])
             for c in _read(data / "chunks.jsonl")}
    return {a["question_id"]: [chunk.get(item.get("chunk_id"), item) for item in a["retrieved"]]
            for a in _read(data / "runs" / "baseline.jsonl")}


def _assert_resumed_at_the_search(metrics: dict, change, data: Path, answers: int, before: dict) -> None:
    """The answers not reused whole whose retrieved passages the change left alone (their
    texts and starts; the rest of their documents may have changed) start at corpus-wide
    search (docs/decisions.md #58, #67): their claims and retrieved-passage verdicts come
    from the answer store, decompose and extract on retrieved passages are not run for them
    (run.json counts them: `answers_resumed`)."""
    judge = metrics["judge"]
    after = passage_rows(data)
    changed = {q for q, rows in after.items() if rows != before.get(q)}
    assert judge["answers_resumed"] == answers - judge["answers_reused"] - len(changed), change.__name__
    if change is not remove_document:  # back on an earlier corpus every answer is reused whole
        assert judge["answers_resumed"] > 0, change.__name__
    if change is edit_documents:  # appended to: the answers retrieving their other chunks resume
        assert answers_citing(data, TOUCHED[change]) - changed, change.__name__


def test_a_rebuild_judges_only_new_pairs_and_gives_the_cold_results(tmp_path, state_dir, monkeypatch):
    data = tmp_path / "data"
    shutil.copytree(SAMPLE, data)
    params = tmp_path / "params.yaml"
    params.write_text(PARAMS)
    seen = PairLog()
    with seen.listening(monkeypatch):
        first = run_evaluate(data, tmp_path / "out-0", params)
    # the model judged what the log saw; the pairs decided without it were never asked
    assert first["judge"]["pairs_judged"] == sum(seen.pairs.values()) > 200
    assert first["judge"]["pairs_judged"] + first["judge"]["pairs_decided"] > 500
    out = tmp_path / "out"  # every run replaces the results of the one before, as results/NAME
    shutil.copytree(tmp_path / "out-0", out)
    for step, change in enumerate(CHANGES, 1):
        before = pd.read_parquet(out / "diagnoses.parquet")
        passages_before = passage_rows(data)
        change(data)
        now, cold = PairLog(), PairLog()
        with now.listening(monkeypatch):
            incremental = run_evaluate(data, out, params)
        with fresh_state(tmp_path / f"fresh-{step}", monkeypatch), cold.listening(monkeypatch):
            scratch = run_evaluate(data, tmp_path / f"cold-{step}", params)
        _assert_same_results(out, tmp_path / f"cold-{step}")
        _assert_reused_whole(incremental, change, len(_read(data / "runs" / "baseline.jsonl")))
        _assert_resumed_at_the_search(incremental, change, data, len(_read(data / "runs" / "baseline.jsonl")),
                                      passages_before)
        assert json.loads((out / "run.json").read_text())["judge"]["answers_resumed"] == incremental["judge"]["answers_resumed"]
        assert scratch["judge"]["answers_resumed"] == 0  # a cold run decomposes every answer
        _assert_rebuild_told(out, before, incremental, change)
        assert "rebuild" not in scratch  # a first run: nothing before it to tell against
        needed = set(cold.pairs) - set(seen.pairs)  # what the new corpus asks that no run asked
        judged = incremental["judge"]["pairs_judged"]
        again = set(now.pairs) - needed  # reused verdicts judged again alone for the marks they now win
        assert needed <= set(now.pairs) and again <= set(seen.pairs), change.__name__
        assert judged == sum(n for p, n in now.pairs.items() if p in needed), change.__name__
        assert incremental["judge"]["marks_rejudged"] == sum(n for p, n in now.pairs.items() if p in again)
        # the rest: verdicts reused, or a whole step Prefect's step cache served (its inputs unchanged)
        assert judged + incremental["judge"]["verdicts_reused"] <= scratch["judge"]["pairs_judged"], change.__name__
        assert judged < scratch["judge"]["pairs_judged"] / 5, change.__name__  # the rest comes from the cache
        if change in (remove_document, rename_chunks):
            # back to the corpus of edit_documents (every pair judged then), and the same
            # texts under new ids: nothing to judge
            assert judged == 0, change.__name__
        else:
            assert judged > 0, change.__name__
        seen.pairs.update(now.pairs)


def test_an_answer_is_evaluated_again_when_its_documents_chunks_move(tmp_path, state_dir, monkeypatch):
    """The answer's passages stay the same, and no claim searched the corpus; but the chunk
    after its retrieved chunk goes, and with it the window that found the claim's evidence
    cut at that chunk's edge. The key by documents holds the document's chunks: the answer
    is evaluated again, and its tables are a cold run's (no chunk split any more)."""
    from test_chunk_split import DOC, _workspace

    cut = DOC.index(" square kilometres")  # the chunk holds enough of the evidence to support the claim
    data = _workspace(tmp_path / "data", [(0, cut), (cut, len(DOC))], 0)
    params = tmp_path / "params.yaml"
    params.write_text(PARAMS)
    out, cold = tmp_path / "out", tmp_path / "cold"

    def evaluate_run(out: Path) -> dict:
        from ragspan.flows.evaluate import evaluate

        return evaluate(data_dir=str(data), run="r", out_dir=str(out), params_path=str(params))

    evaluate_run(out)
    split = pd.read_parquet(out / "diagnoses.parquet").iloc[0]
    assert split["label"] == "correct" and split["evidence_source"] == "retrieved" and split["chunk_split"]
    _write(data / "chunks.jsonl", [c for c in _read(data / "chunks.jsonl") if c["chunk_id"] != "aral#1"])
    again = evaluate_run(out)
    with fresh_state(tmp_path / "fresh", monkeypatch):
        evaluate_run(cold)
    _assert_same_results(out, cold)
    assert again["judge"]["answers_reused"] == 0
    assert not pd.read_parquet(out / "diagnoses.parquet").iloc[0]["chunk_split"]  # the change mattered
