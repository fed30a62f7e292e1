"""The answer store (tasks/reuse/answer_store.py): keys, round trip, retries, damage, pruning, order."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from ragspan.tasks.core import schemas
from ragspan.tasks.core.shards import ShardResult
from ragspan.tasks.judges.base import JudgeSpec, JudgeStats
from ragspan.tasks.reuse.answer_store import (
    MAX_CONTEXTS,
    MAX_SEGMENTS,
    answer_keys,
    context_key,
    corpus_identity,
    in_answer_order,
    merged,
    remember,
    split_known,
)


def _answers(n: int = 3) -> pd.DataFrame:
    return schemas.Answers.validate(pd.DataFrame({
        "run": ["r"] * n, "question_id": [f"q{i}" for i in range(n)],
        "question": [f"Question {i}?" for i in range(n)],
        "answer": [f"Answer number {i}." for i in range(n)], "claims": [None] * n,
    }))


def _passages(n: int = 3) -> pd.DataFrame:
    rows = [{"question_id": f"q{i}", "claim_id": None, "source": "retrieved", "chunk_id": f"c{i}-{r}",
             "doc_id": f"d{i}", "passage_start": 10 * r, "rank": r + 1, "in_context": r < 1, "score": 1.0 / (r + 1),
             "passage_text": f"passage {i} {r}"} for i in range(n) for r in range(2)]
    return schemas.table(rows, schemas.Passages)


def _table(rows: list[dict], model: type) -> pd.DataFrame:
    """Rows with the columns the steps produce (byte offsets are added only on write)."""
    columns = [c for c in model.to_schema().columns if c not in ("byte_start", "byte_end")]
    return model.validate(pd.DataFrame(rows, columns=columns))


def _judged(question_ids: list[str]) -> pd.DataFrame:
    """Verdicts on each answer's two retrieved passages (as _passages cites them)."""
    return schemas.table([{"claim_id": f"{q}:c0", "source": "retrieved", "chunk_id": f"c{q[1:]}-{r}",
                           "doc_id": f"d{q[1:]}", "rank": r + 1, "in_context": r < 1, "score": 1.0 / (r + 1),
                           "verdict": "supported" if r else "unsupported", "confidence": 0.9, "support": 0.5,
                           "char_start": None, "char_end": None, "span_text": None, "match": None,
                           "reason": None, "error": None, "decided_by": "local", "marks": None}
                          for q in question_ids for r in range(2)], schemas.Judgements, written=False)


def _result(question_ids: list[str], retry: frozenset[str] = frozenset(),
            searched: frozenset[str] = frozenset()) -> ShardResult:
    claims = schemas.table([{"run": "r", "question_id": q, "claim_id": f"{q}:c0", "claim_index": 0,
                             "claim": f"claim of {q}", "question": f"question {q}?", "answer_start": 0, "answer_end": 5,
                             "origin": "decomposed", "decompose_error": None} for q in question_ids], schemas.Claims)
    spans = _table([{"claim_id": f"{q}:c0", "source": "retrieved", "chunk_id": f"c-{q}", "doc_id": "d",
                            "char_start": 0, "char_end": 4, "span_text": "text", "match": "exact", "rank": 1,
                            "in_context": True, "score": 0.5, "verdict": "supported", "confidence": 0.9,
                     "reason": None} for q in question_ids], schemas.Spans)
    diagnoses = _table([{"run": "r", "question_id": q, "claim_id": f"{q}:c0", "claim": f"claim of {q}",
                                "answer_start": 0, "answer_end": 5, "label": "correct", "doc_id": "d",
                                "chunk_id": f"c-{q}", "char_start": 0, "char_end": 4, "span_text": "text", "rank": 1,
                                "in_context": True, "score": 0.5, "reason": "because", "source_conflict": False,
                                "evidence_source": "retrieved", "match": "exact", "confidence": 0.9,
                                "support_probability": 0.9, "uncertain": False, "decided_by": "local"}
                        for q in question_ids], schemas.Diagnoses)
    return ShardResult(claims, spans, diagnoses, JudgeStats(calls=len(question_ids)), {}, retry,
                       searched=searched & set(question_ids), judged=_judged(question_ids))


CTX = context_key(JudgeSpec(), "code-1", (0.6, 0.1), 5)


def test_a_changed_passage_changes_only_its_answers_key():
    answers, passages = _answers(), _passages()
    before = answer_keys(answers, passages, CTX)
    changed = passages.copy()
    changed.loc[changed["question_id"] == "q1", "passage_text"] = "a different passage"
    after = answer_keys(answers, changed, CTX)
    assert [q for q in before if before[q] != after[q]] == ["q1"]
    reranked = passages.copy()
    reranked.loc[reranked["question_id"] == "q2", "in_context"] = True  # the cutoff moved
    assert [q for q, k in answer_keys(answers, reranked, CTX).items() if k != before[q]] == ["q2"]


def test_keys_do_not_depend_on_answer_order_but_on_every_part_of_the_context():
    answers, passages = _answers(), _passages()
    keys = answer_keys(answers, passages, CTX)
    assert answer_keys(answers.iloc[::-1].reset_index(drop=True), passages, CTX) == keys
    others = [
        context_key(JudgeSpec(prompt_version="local-0"), "code-1", (0.6, 0.1), 5),
        context_key(JudgeSpec(), "code-2", (0.6, 0.1), 5),
        context_key(JudgeSpec(), "code-1", (0.7, 0.1), 5),
        context_key(JudgeSpec(), "code-1", (0.6, 0.1), 6),
        context_key(JudgeSpec(), "code-1", (0.6, 0.2), 5),
    ]
    assert len({CTX, *others}) == 1 + len(others)
    for ctx in others:
        assert {k for ks in answer_keys(answers, passages, ctx).values() for k in ks}.isdisjoint(
            k for ks in keys.values() for k in ks)


def _corpus(n: int, edited: str = "", index: str = "/state/index/abc") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(chunks, corpus) of the documents d0..d{n-1} that _passages(n) cites, plus one no
    answer retrieves; `edited`: a document whose text (and last chunk) grew."""
    texts = {f"d{i}": f"passage {i} 0 passage {i} 1" for i in range(n)} | {"d-other": "nobody retrieves this"}
    if edited:
        texts[edited] += " and more"
    corpus = pd.DataFrame({"doc_id": list(texts), "text": list(texts.values())})
    chunks = pd.DataFrame([{"chunk_id": f"{d}#{r}", "doc_id": d, "char_start": 10 * r,
                            "char_end": len(t) if r else 10} for d, t in texts.items() for r in range(2)])
    return chunks, corpus


def test_the_corpus_enters_a_key_by_the_documents_an_answer_cites_or_whole():
    answers, passages = _answers(3), _passages(3)
    before = answer_keys(answers, passages, CTX, corpus_identity(*_corpus(3), "/state/index/abc"))
    # a document no answer cites: every key by documents stays, every key by the corpus moves
    other = answer_keys(answers, passages, CTX, corpus_identity(*_corpus(3, "d-other"), "/state/index/xyz"))
    assert all(other[q].documents == k.documents and other[q].corpus != k.corpus for q, k in before.items())
    # q1's document (its chunk rows, its text between chunks): only q1's key by documents moves
    chunks, corpus = _corpus(3)
    moved = chunks.assign(char_end=chunks["char_end"].where(chunks["chunk_id"] != "d1#0", 9))
    for changed in (corpus_identity(moved, corpus, "/state/index/abc"),
                    corpus_identity(*_corpus(3, "d1"), "/state/index/abc")):
        keys = answer_keys(answers, passages, CTX, changed)
        assert [q for q, k in before.items() if keys[q].documents != k.documents] == ["q1"]
    # the order of the chunk table is no part of it
    assert answer_keys(answers, passages, CTX, corpus_identity(chunks.iloc[::-1], corpus, "/state/index/abc")) == before


def test_an_answer_that_searched_the_corpus_is_reused_only_on_the_same_corpus(tmp_path: Path):
    answers, passages = _answers(3), _passages(3)
    old = corpus_identity(*_corpus(3), "/state/index/abc")
    first = split_known(answers, passages, tmp_path, CTX, True, old)
    remember(first, merged(first, answers, [_result(["q0", "q1", "q2"], searched=frozenset({"q2"}))]))
    assert split_known(answers, passages, tmp_path, CTX, True, old).reused == 3
    # a document nobody cites changed: q2's corpus-wide search may now rank other chunks
    new = corpus_identity(*_corpus(3, "d-other"), "/state/index/xyz")
    after = split_known(answers, passages, tmp_path, CTX, True, new)
    assert list(after.fresh["question_id"]) == ["q2"] and list(after.known.claims["question_id"]) == ["q0", "q1"]
    remember(after, merged(after, answers, [_result(["q2"], searched=frozenset({"q2"}))]))
    # q0's own document changed too: q0 is evaluated again, q1 still reused
    both = corpus_identity(*_corpus(3, "d0"), "/state/index/xyz2")
    assert list(split_known(answers, passages, tmp_path, CTX, True, both).fresh["question_id"]) == ["q0", "q2"]


def test_an_answer_resumes_at_the_search_while_its_passages_stay(tmp_path: Path):
    """Every answer's claims and retrieved-passage verdicts are stored under its key by
    passages (docs/decisions.md #58, #67): after a change elsewhere in the corpus — or in
    its own documents, outside the chunks it retrieved — an answer not reused whole is
    handed them back; once a passage it retrieved changed, it starts from decompose."""
    answers, passages = _answers(3), _passages(3)
    old = corpus_identity(*_corpus(3), "/state/index/abc")
    first = split_known(answers, passages, tmp_path, CTX, True, old)
    made = _result(["q0", "q1", "q2"], searched=frozenset({"q1", "q2"}))
    remember(first, made)
    elsewhere = split_known(answers, passages, tmp_path, CTX, True, corpus_identity(*_corpus(3, "d-other"), "/i/x"))
    assert list(elsewhere.fresh["question_id"]) == ["q1", "q2"] and set(elsewhere.resume) == {"q1", "q2"}
    prior = elsewhere.prior_of(["q0", "q2"])
    assert prior is not None and prior.question_ids == {"q2"}
    pd.testing.assert_frame_equal(prior.claims, made.claims.iloc[[2]].reset_index(drop=True))
    pd.testing.assert_frame_equal(prior.judged, made.judged.iloc[[4, 5]].reset_index(drop=True))
    # its own document changed (appended to, say), its chunks' texts and starts not: it resumes,
    # and so does an answer that never searched (stored whole by its documents, which moved)
    own = split_known(answers, passages, tmp_path, CTX, True, corpus_identity(*_corpus(3, "d2"), "/i/y"))
    assert list(own.fresh["question_id"]) == ["q1", "q2"] and set(own.resume) == {"q1", "q2"}
    no_search = split_known(answers, passages, tmp_path, CTX, True, corpus_identity(*_corpus(3, "d0"), "/i/z"))
    assert list(no_search.fresh["question_id"]) == ["q0", "q1", "q2"] and set(no_search.resume) == {"q0", "q1", "q2"}
    # a passage it retrieved changed: decomposed again
    moved = passages.copy()
    moved.loc[moved["question_id"] == "q2", "passage_text"] = "passage 2 rewritten"
    rewritten = split_known(answers, moved, tmp_path, CTX, True, corpus_identity(*_corpus(3, "d2"), "/i/y"))
    assert list(rewritten.fresh["question_id"]) == ["q1", "q2"] and set(rewritten.resume) == {"q1"}
    assert rewritten.prior_of(["q2"]) is None


def test_round_trip_serves_stored_answers_and_evaluates_the_rest(tmp_path: Path):
    answers, passages = _answers(3), _passages(3)
    first = split_known(answers, passages, tmp_path, CTX, enabled=True)
    assert first.reused == 0 and len(first.fresh) == 3
    remember(first, merged(first, answers, [_result(["q2", "q0"]), _result(["q1"])]))
    again = split_known(answers, passages, tmp_path, CTX, enabled=True)
    assert again.reused == 3 and again.fresh.empty
    assert list(again.known.claims["question_id"]) == ["q0", "q1", "q2"]  # input order restored
    assert list(again.known.spans.columns) == list(_result(["q0"]).spans.columns)
    # One answer changed: only it is fresh; the others' rows come back unchanged.
    changed = answers.copy()
    changed.loc[1, "answer"] = "Something new."
    partial = split_known(changed, passages, tmp_path, CTX, enabled=True)
    assert list(partial.fresh["question_id"]) == ["q1"] and partial.reused == 2
    run = merged(partial, changed, [_result(["q1"])])
    pd.testing.assert_frame_equal(run.diagnoses, merged(first, answers, [_result(["q0", "q1", "q2"])]).diagnoses)
    assert run.stats.calls == 1  # stored answers cost no call


def test_answers_with_a_retryable_judge_failure_are_not_stored(tmp_path: Path):
    answers, passages = _answers(3), _passages(3)
    first = split_known(answers, passages, tmp_path, CTX, enabled=True)
    remember(first, merged(first, answers, [_result(["q0", "q1", "q2"], retry=frozenset({"q1"}))]))
    again = split_known(answers, passages, tmp_path, CTX, enabled=True)
    assert list(again.fresh["question_id"]) == ["q1"]


def test_a_damaged_store_costs_a_re_evaluation_not_a_crash(tmp_path: Path):
    answers, passages = _answers(2), _passages(2)
    first = split_known(answers, passages, tmp_path, CTX, enabled=True)
    remember(first, merged(first, answers, [_result(["q0", "q1"])]))
    for f in (tmp_path / CTX).glob("seg-*/diagnoses.parquet"):
        f.write_bytes(b"not parquet")
    again = split_known(answers, passages, tmp_path, CTX, enabled=True)
    assert again.reused == 0 and len(again.fresh) == 2
    remember(again, merged(again, answers, [_result(["q0", "q1"])]))  # and the store heals
    assert split_known(answers, passages, tmp_path, CTX, enabled=True).reused == 2


def test_reuse_off_evaluates_everything_and_stores_nothing(tmp_path: Path):
    answers, passages = _answers(2), _passages(2)
    off = split_known(answers, passages, tmp_path, CTX, enabled=False)
    assert off.reused == 0 and len(off.fresh) == 2
    remember(off, merged(off, answers, [_result(["q0", "q1"])]))
    assert not any(tmp_path.iterdir())


def test_only_the_most_recent_contexts_are_kept(tmp_path: Path):
    answers, passages = _answers(1), _passages(1)
    contexts = [context_key(JudgeSpec(), f"code-{i}", (0.6, 0.1), 5) for i in range(MAX_CONTEXTS + 2)]
    for ctx in contexts:
        r = split_known(answers, passages, tmp_path, ctx, enabled=True)
        remember(r, merged(r, answers, [_result(["q0"])]))
    kept = {p.name for p in tmp_path.iterdir() if p.is_dir() and not p.name.startswith(".")}
    assert len(kept) == MAX_CONTEXTS and contexts[-1] in kept and contexts[0] not in kept


def test_answer_order_is_stable_inside_an_answer():
    answers = _answers(3)
    table = pd.DataFrame({"question_id": ["q2", "q0", "q2", "q1", "q0"], "n": [1, 2, 3, 4, 5]})
    out = in_answer_order(table, table["question_id"], answers)
    assert list(out["n"]) == [2, 5, 4, 1, 3]


@pytest.mark.parametrize("bad", [b"", b"PAR1garbage"])
def test_a_truncated_table_is_treated_as_no_store(tmp_path: Path, bad: bytes):
    answers, passages = _answers(1), _passages(1)
    r = split_known(answers, passages, tmp_path, CTX, enabled=True)
    remember(r, merged(r, answers, [_result(["q0"])]))
    for f in (tmp_path / CTX).glob("seg-*/claims.parquet"):
        f.write_bytes(bad)
    assert split_known(answers, passages, tmp_path, CTX, enabled=True).reused == 0


def test_each_run_appends_a_segment_and_many_are_folded_into_one(tmp_path: Path):
    n = MAX_SEGMENTS + 3
    answers, passages = _answers(n), _passages(n)
    for i in range(n):  # one new answer per run, as a 5 %-changed re-run adds a few
        mine = answers.iloc[: i + 1].reset_index(drop=True)
        r = split_known(mine, passages, tmp_path, CTX, enabled=True)
        assert r.reused == i and list(r.fresh["question_id"]) == [f"q{i}"]
        remember(r, merged(r, mine, [_result([f"q{i}"])]))
        assert len(list((tmp_path / CTX).glob("seg-*"))) <= MAX_SEGMENTS
    final = split_known(answers, passages, tmp_path, CTX, enabled=True)
    assert final.reused == n and final.fresh.empty
    assert list(final.known.diagnoses["question_id"]) == [f"q{i}" for i in range(n)]
    assert len(final.known.spans) == n  # no answer's rows twice after folding


def test_folding_the_segments_keeps_every_pre_search_state(tmp_path: Path):
    n = MAX_SEGMENTS + 3
    answers, passages = _answers(n), _passages(n)
    corpus = corpus_identity(*_corpus(n), "/state/index/abc")
    for i in range(n):  # one new answer per run, each searched the corpus
        mine = answers.iloc[: i + 1].reset_index(drop=True)
        r = split_known(mine, passages, tmp_path, CTX, True, corpus)
        remember(r, _result([f"q{i}"], searched=frozenset({f"q{i}"})))
    assert len(list((tmp_path / CTX).glob("seg-*"))) < n  # folded
    after = split_known(answers, passages, tmp_path, CTX, True, corpus_identity(*_corpus(n, "d-other"), "/i/x"))
    assert after.reused == 0 and set(after.resume) == set(answers["question_id"])
    prior = after.prior_of(answers["question_id"].tolist())
    assert prior is not None and len(prior.claims) == n and len(prior.judged) == 2 * n


def test_the_newest_segment_wins_for_an_answer_stored_twice(tmp_path: Path):
    answers, passages = _answers(1), _passages(1)
    for label in ("correct", "hallucination"):  # e.g. two runs racing on the same answer
        r = split_known(answers, passages, tmp_path, CTX, enabled=False)
        r = type(r)(answers, r.known, answer_keys(answers, passages, CTX), str(tmp_path / CTX))
        res = _result(["q0"])
        res = ShardResult(res.claims, res.spans, res.diagnoses.assign(label=label), res.stats, {})
        remember(r, merged(r, answers, [res]))
    again = split_known(answers, passages, tmp_path, CTX, enabled=True)
    assert list(again.known.diagnoses["label"]) == ["hallucination"] and len(again.known.claims) == 1
