"""reuse: answers already evaluated under the same conditions are not evaluated again.

Every step works answer by answer — an answer's claims, judgements, corpus hits and
diagnoses depend only on the answer itself, the passages retrieved for it (texts, ranks,
cutoff, reference answer), the chunk windows of the documents those passages come from,
the corpus as a whole when one of its claims went to corpus-wide search (BM25's scores and
top-k follow the whole corpus's statistics), and a shared *context*: the judge spec, the
code version, the support threshold and the corpus-search depth. So each answer has two
keys (AnswerKey: answer row + its passages + the context, with the hash of every document
its passages cite, or with the corpus digest): it is stored under the one by documents when
none of its claims searched the corpus, else under the one by corpus; an answer with either
key in the store gets its rows from there; only the others go through the shards and their
cached Prefect steps. A re-run with 5 % of the answers changed evaluates those 5 %, wherever
they are in the file (Prefect's step cache alone re-runs every shard that holds one changed
answer); one after 5 % of the documents changed evaluates the answers that cite them and
those that searched the corpus (docs/decisions.md #52) — from corpus-wide search on, unless
a passage they retrieved changed: every answer's claims and retrieved-passage verdicts
(pre-search state) are stored under its key by passages (tasks/reuse/pre_search.py,
docs/decisions.md #58, #67), `Reuse.resume` says whose are found, and each shard is handed
them as it is made (`Reuse.prior_of`).

Store: `<state>/answers/<context>/seg-*/{claims,spans,diagnoses}.parquet`, each row
tagged with its answer's key — the store layer's directory store `answer_store`
(tasks/state/_store.py), a context's segments its sealed entries. Each run appends one segment
with the answers it evaluated (written aside, sealed, then renamed: a segment appears whole
or not at all; no room is DiskFull, the other segments kept); beyond MAX_SEGMENTS
they are folded into one, the newest rows of an answer winning. Answers hit by a judge failure another attempt may not repeat (an
outage, a spent budget: RETRYABLE_FAILURES) are never stored, so the next run tries them
again (their good calls then come from the judge cache). A change of judge, prompt,
threshold, search depth or code is a new context: nothing is reused across it. Only the
MAX_CONTEXTS most recently used contexts are kept. `pipeline.reuse_answers: false` turns
the store off (Prefect's step cache still applies). docs/decisions.md #17, #52.

The run's results are not assembled into tables: `RunParts` (the stored rows + the spilled
shards) gives each table in answer order one window of answers at a time (`chunks`), and
the segment (`remember`) and the results' table files (tasks/reporting/report.py) are
written from those pieces as Parquet row groups — memory set by a shard, not by the run
(docs/decisions.md #54). `merged` still assembles them, for callers that want the tables.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE
from ragspan.tasks.core import schemas
from ragspan.tasks.core.corpus_identity import corpus_document_hashes
from ragspan.tasks.core.shards import PreSearch, ShardResult
from ragspan.tasks.judges.base import JudgeSpec, JudgeStats
from ragspan.tasks.reuse import pre_search
from ragspan.tasks.reuse.shard_spill import SpilledShard
from ragspan.tasks.state import (
    REGISTRY,
    DirStore,
    dir_store,
    discard,
    file_lock,
    touch,
    write_parquet_pieces,
)

STORE_FORMAT = "reuse-2"  # bump when the stored tables' meaning changes (2: sealed segments)
MAX_CONTEXTS = REGISTRY["answer_store"].keep  # the most recently used contexts kept
MAX_SEGMENTS = 16  # appended per run; folded into one beyond this
KEY = "answer_key"
_TABLES = {"claims": schemas.Claims, "spans": schemas.Spans, "diagnoses": schemas.Diagnoses,
           "answer_spans": schemas.AnswerSpans}


@dataclass(frozen=True)
class Reuse:
    """The answers still to evaluate, and the stored rows of all the others."""

    fresh: pd.DataFrame  # schemas.Answers: evaluate these
    known: ShardResult  # claims / spans / diagnoses of the reused answers (no judge call)
    keys: dict[str, AnswerKey]  # question_id → its keys, for every answer of the run
    store: str  # this context's store directory ("" = reuse off)
    reused: int = 0  # answers served from the store
    # fresh answers whose pre-search state is stored: question_id → its piece file
    resume: dict[str, str] = field(default_factory=dict)

    def prior_of(self, question_ids: Sequence[str]) -> PreSearch | None:
        """The stored pre-search state of those of `question_ids` that have one (a shard's)."""
        files = {self.keys[q].passages: self.resume[q] for q in question_ids if q in self.resume}
        return pre_search.read_pre_search(files) if files else None


def context_key(spec: JudgeSpec, code: str, decision: tuple[float, float], top_k: int) -> str:
    """What every answer's results share: judge, code, thresholds, corpus-search depth. Not
    the corpus: what of it an answer read is in its key (answer_keys), so an answer whose
    documents a corpus change left alone is reused across it."""
    blob = json.dumps([STORE_FORMAT, spec.as_dict(), code, list(decision), top_k], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class CorpusIdentity:
    """What of the corpus an answer's results can depend on: each document's hash (its text
    and its chunks' ids and places: every chunk window joins chunks of one document), and
    the whole corpus's digest (the corpus-wide search reads everything)."""

    digest: str
    documents: pd.Series  # doc_id → uint64 hash of the document's text and chunk rows


NO_CORPUS = CorpusIdentity("", pd.Series([], dtype=np.uint64))  # callers that give none: one fixed corpus


def corpus_identity(chunks: pd.DataFrame, corpus: pd.DataFrame, index_dir: str,
                    documents: pd.Series | None = None) -> CorpusIdentity:
    """Per-document hashes (tasks/core/corpus_identity.py: vectorised; `documents` when the
    caller keeps them: Workspace.document_hashes) and the corpus digest: the index's name
    (the chunk table with its texts) plus every document's hash (which also covers the text
    between chunks that windows join across)."""
    documents = corpus_document_hashes(chunks, corpus) if documents is None else documents
    digest = hashlib.sha256(Path(index_dir).name.encode())
    digest.update("\x00".join(documents.index).encode("utf-8", "surrogatepass"))
    digest.update(documents.to_numpy(dtype=np.uint64).tobytes())
    return CorpusIdentity(digest.hexdigest()[:24], documents)


class AnswerKey(NamedTuple):
    """An answer's keys. `documents` (answer, passages, context and the hash of every
    document its passages come from) is the key it is stored under when none of its claims
    went to corpus-wide search; `corpus` (answer, passages, context and the corpus digest)
    when one did — BM25 scores and top-k follow the whole corpus's statistics. `passages`
    (answer, passages, context: no document) keys its pre-search state — its claims and the
    verdicts on its retrieved passages read the answer and those passages' rows alone (their
    texts and where they start), not the rest of their documents: appending to a document
    leaves the answers retrieving its other chunks at the search (issue 42 item 4)."""

    documents: str
    corpus: str
    passages: str


def _row_hashes(table: pd.DataFrame) -> np.ndarray:
    """One uint64 per row over every column (lists and None hashed via their JSON)."""
    cols = {}
    for name in table.columns:
        col = table[name]
        if col.dtype == object:
            col = col.map(lambda v: json.dumps(v, sort_keys=True, default=str, ensure_ascii=False))
        cols[name] = col.astype(str) if col.dtype == object else col
    frame = pd.DataFrame(cols, index=table.index)
    return pd.util.hash_pandas_object(frame, index=False).to_numpy()


def answer_keys(answers: pd.DataFrame, passages: pd.DataFrame, context: str,
                corpus: CorpusIdentity = NO_CORPUS) -> dict[str, AnswerKey]:
    """question_id → its AnswerKey: hashes of the answer row, its passages (in order) and
    the context, with its documents' hashes or with the corpus digest."""
    per_question: dict[str, list[int]] = defaultdict(list)
    doc_of_question: dict[str, list[int]] = defaultdict(list)
    # reference answers (no doc_id) and documents missing from the corpus hash as 0
    doc_hashes = passages["doc_id"].map(corpus.documents).fillna(0).to_numpy(dtype=np.uint64)
    for q, h, d in zip(passages["question_id"].tolist(), _row_hashes(passages), doc_hashes):
        per_question[q].append(int(h))
        doc_of_question[q].append(int(d))
    head = json.dumps([context, list(answers.columns), list(passages.columns)]).encode()
    keys = {}
    for q, h in zip(answers["question_id"], _row_hashes(answers)):
        base = hashlib.sha256(head)
        base.update(np.array([h, *per_question.get(q, ())], dtype=np.uint64).tobytes())
        by_documents, by_passages, by_corpus = base.copy(), base.copy(), base
        by_documents.update(b"documents")
        by_documents.update(np.array(doc_of_question.get(q, ()), dtype=np.uint64).tobytes())
        by_passages.update(b"passages")
        by_corpus.update(b"corpus" + corpus.digest.encode())
        keys[q] = AnswerKey(by_documents.hexdigest()[:32], by_corpus.hexdigest()[:32], by_passages.hexdigest()[:32])
    return keys


_HEALED = "its answers are evaluated again and stored"


def _segments_of(store: Path) -> DirStore:
    """A context's segments: entries of the answer store's context directory."""
    return dir_store("answer_store", store.parent).within(store.name, pattern="seg-*")


def _segments(store: Path) -> list[Path]:
    return [p for p in _segments_of(store).names() if p.is_dir()]


def _read_segment(seg: Path) -> dict[str, pd.DataFrame] | None:
    """The segment's tables, checked against its sums.json first. A damaged segment is
    moved aside with one warning line (its answers are evaluated again and stored anew);
    one that vanished meanwhile (folded by another run) is skipped in silence."""
    segments = _segments_of(seg.parent)
    if segments.checked_dir(seg.name, _HEALED, mark=False) is None:
        return None
    try:
        tables = {name: pd.read_parquet(seg / f"{name}.parquet") for name in _TABLES}
        if all(KEY in t.columns for t in tables.values()):
            return tables
        problem = f"a table lacks the {KEY} column"
    except (OSError, ValueError) as exc:
        problem = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    segments.heal(seg, problem, _HEALED)
    return None


def _read_store(store: Path) -> dict[str, pd.DataFrame] | None:
    """Every answer's rows from the newest segment that holds it, or None when there is
    nothing readable (a damaged segment only costs its answers a re-evaluation)."""
    parts: dict[str, list[pd.DataFrame]] = {name: [] for name in _TABLES}
    for i, seg in enumerate(_segments(store)):
        tables = _read_segment(seg)
        if tables is not None:
            for name, t in tables.items():
                parts[name].append(t.assign(_seg=i))
    if not parts["claims"]:
        return None
    tables = {name: pd.concat(ts, ignore_index=True) for name, ts in parts.items()}
    newest = tables["claims"].groupby(KEY)["_seg"].max()
    return {name: t[t["_seg"] == t[KEY].map(newest)].drop(columns=["_seg"]) for name, t in tables.items()}


def _empty(model: type) -> pd.DataFrame:
    """A table with the columns the steps produce (byte offsets are added only on write)."""
    return schemas.table([], model, written=False)


def _strip(table: pd.DataFrame, model: type) -> pd.DataFrame:
    return model.validate(table.drop(columns=[KEY]).reset_index(drop=True))


def split_known(answers: pd.DataFrame, passages: pd.DataFrame, root: Path, context: str, enabled: bool,
                corpus: CorpusIdentity = NO_CORPUS) -> Reuse:
    """Answers with a key stored under `root/context` are served from there: the key by
    their documents (stored when no claim searched the corpus), or the one by the corpus."""
    keys = answer_keys(answers, passages, context, corpus) if enabled else {}
    store = root / context
    stored = _read_store(store) if enabled and store.exists() else None
    if stored is None:
        claims, spans, diagnoses, answer_spans = (_empty(m) for m in _TABLES.values())
        empty = ShardResult(claims, spans, diagnoses, JudgeStats(), {}, answer_spans=answer_spans)
        return Reuse(answers, empty, keys, str(store) if enabled else "")
    # An answer is reused only when its claims and diagnoses are both there (spans may be none).
    have = set(stored["claims"][KEY].tolist()) & set(stored["diagnoses"][KEY].tolist())
    # One key per answer (an answer's claims either searched the corpus or did not: never both).
    found = {q: k.documents if k.documents in have else k.corpus for q, k in keys.items()
             if k.documents in have or k.corpus in have}
    fresh = answers[~answers["question_id"].isin(found.keys())].reset_index(drop=True)
    used = set(found.values())
    tables = {n: _strip(t[t[KEY].isin(used)], _TABLES[n]) for n, t in stored.items()}
    touch(store)  # recently used: kept by the pruning in remember()
    known = ShardResult(tables["claims"], tables["spans"], tables["diagnoses"], JudgeStats(), {},
                        answer_spans=tables["answer_spans"])
    return Reuse(fresh, known, keys, str(store), reused=len(answers) - len(fresh),
                 resume=_resumable(fresh, keys, store))


def _resumable(fresh: pd.DataFrame, keys: dict[str, AnswerKey], store: Path) -> dict[str, str]:
    """Fresh answers whose pre-search state a segment holds under their key by passages
    (their passages unchanged): question_id → the piece file."""
    where = pre_search.located(_segments(store))
    return {q: where[keys[q].passages] for q in fresh["question_id"] if keys[q].passages in where}


class AnswerPositions:
    """Each answer's position in input order, looked up for a whole column at once (an
    index's get_indexer: ~6× faster than Series.map with a dict, which the report's ordering
    did for every table and window). The same numbers; a question not among the answers is
    NaN, as map gives it; answers with a repeated question_id are looked up as map would."""

    def __init__(self, question_ids: pd.Series) -> None:
        self._index = pd.Index(question_ids)
        self._by_id = None if self._index.is_unique else dict(zip(question_ids, range(len(question_ids))))

    def of(self, column: pd.Series) -> np.ndarray:
        if self._by_id is not None:
            return column.map(self._by_id).to_numpy()
        at = self._index.get_indexer(column)
        return np.where(at < 0, np.nan, at) if (at < 0).any() else at


def in_answer_order(table: pd.DataFrame, question_ids: pd.Series, answers: pd.DataFrame) -> pd.DataFrame:
    """Rows grouped by answer in input order; the order inside an answer is kept, so a
    table is the same whichever shards (or the store) its rows came from."""
    order = AnswerPositions(answers["question_id"]).of(question_ids)
    return table.iloc[np.argsort(order, kind="stable")].reset_index(drop=True)


def _table_of(part: ShardResult | SpilledShard, name: str) -> pd.DataFrame:
    """One output table of a shard's result, in memory or read back from disk."""
    if isinstance(part, SpilledShard):
        return part.table(name)
    if name == "judged" and part.judged is None:  # a shard result made without one
        return pd.DataFrame({"claim_id": pd.Series([], dtype=object)})
    return part.answer_spans_table() if name == "answer_spans" else getattr(part, name)


def _step_table_of(part: ShardResult | SpilledShard, name: str) -> pd.DataFrame:
    """`_table_of` without the byte-offset columns (schemas.WRITE_ONLY): a step may leave
    them, empty, in its table (diagnose's) and another not (chunk_split's), and they are
    computed only on write. Pieces of one table then have the same columns — as one
    concatenated table has."""
    table = _table_of(part, name)
    extra = [c for c in schemas.WRITE_ONLY if c in table.columns]
    return table.drop(columns=extra) if extra else table


def _question_ids(table: pd.DataFrame, name: str, question_of: dict[str, str]) -> pd.Series:
    """The question of each row: its own column, or for spans that of its claim."""
    return table["claim_id"].map(question_of) if name == "spans" else table["question_id"]


def merged(reuse: Reuse, answers: pd.DataFrame, results: Sequence[ShardResult | SpilledShard]) -> ShardResult:
    """The run's tables in memory: stored rows plus the shards', in answer order. The flow
    no longer assembles them (RunParts.chunks writes them window by window); kept for
    callers that want the tables themselves, and as the reference the streamed tables
    equal (tests/test_spill.py)."""
    parts = [reuse.known, *results]

    def assembled(name: str, question_ids: Callable[[pd.DataFrame], pd.Series]) -> pd.DataFrame:
        table = pd.concat([_table_of(p, name) for p in parts], ignore_index=True)
        return in_answer_order(table, question_ids(table), answers)

    claims = assembled("claims", lambda t: t["question_id"])
    question_of = dict(zip(claims["claim_id"], claims["question_id"]))
    spans = assembled("spans", lambda t: t["claim_id"].map(question_of))
    diagnoses = assembled("diagnoses", lambda t: t["question_id"])
    answer_spans = assembled("answer_spans", lambda t: t["question_id"])
    run = RunParts(reuse, answers, results)
    return ShardResult(claims, spans, diagnoses, run.stats, run.states, run.retry, answer_spans, searched=run.searched)


@dataclass(frozen=True, eq=False)  # eq=False: it holds DataFrames
class RunParts:
    """The run's results where they lie — the reused answers' rows (in memory, read from
    the store) and each shard's (on disk once spilled) — read one window of answers at a
    time. `chunks(name)` gives a table in answer order as consecutive pieces whose
    concatenation is `merged`'s table: the outputs are written from them as Parquet row
    groups, so no table of every answer is ever assembled (issue 35, item 4)."""

    reuse: Reuse
    answers: pd.DataFrame  # schemas.Answers: every answer of the run, in input order
    results: Sequence[ShardResult | SpilledShard]

    @property
    def stats(self) -> JudgeStats:
        return sum((p.stats for p in self.results), JudgeStats())

    @property
    def states(self) -> dict[str, dict[str, int]]:
        """Prefect state names of the shards' task runs, counted over every shard."""
        states: dict[str, dict[str, int]] = {}
        for p in self.results:
            for name, counts in p.states.items():
                for state, n in counts.items():
                    states.setdefault(name, {})[state] = states.get(name, {}).get(state, 0) + n
        return states

    @property
    def retry(self) -> frozenset[str]:
        return frozenset().union(*(p.retry for p in self.results))

    @property
    def searched(self) -> frozenset[str]:
        """The answers with a claim that went to corpus-wide search (their key: the corpus)."""
        return frozenset().union(*(p.searched for p in self.results))

    @property
    def resumed(self) -> int:
        """Answers whose chain started at corpus-wide search, from their stored pre-search state."""
        return sum(p.resumed for p in self.results)

    def _windows(self, position: AnswerPositions) -> list[tuple[int, list[int]]]:
        """The shards grouped into windows of answers: (the window's last answer position,
        the shards in it), windows in answer order. A shard's answers are consecutive in
        the flow (iter_shards), so each shard is a window of its own; shards whose answers
        interleave share one, so every window's rows can be ordered on their own."""
        spans: list[tuple[int, int, int]] = []  # (first, last answer position, shard)
        for i, part in enumerate(self.results):
            asked = pd.concat([_table_of(part, n)["question_id"] for n in ("claims", "diagnoses")])
            positions = position.of(asked)
            if len(positions):
                spans.append((int(np.nanmin(positions)), int(np.nanmax(positions)), i))
        windows: list[tuple[int, list[int]]] = []
        for first, last, i in sorted(spans):
            if windows and first <= windows[-1][0]:
                windows[-1] = (max(last, windows[-1][0]), [*windows[-1][1], i])
            else:
                windows.append((last, [i]))
        return windows

    def chunks(self, name: str) -> Iterator[pd.DataFrame]:
        """Table `name` in answer order, one window of answers at a time (the rows of the
        reused answers before and inside it with those of its shards), the order inside
        an answer kept. Only one window's rows are in memory at once, besides the store's."""
        position = AnswerPositions(self.answers["question_id"])
        known = _step_table_of(self.reuse.known, name)
        known_of = dict(zip(self.reuse.known.claims["claim_id"].tolist(), self.reuse.known.claims["question_id"].tolist()))
        known_at = position.of(_question_ids(known, name, known_of))
        order = np.argsort(known_at, kind="stable")  # row numbers: the stored rows are not copied
        sorted_at = known_at[order]
        done = 0  # stored rows (in `order`) already given
        for last, members in self._windows(position):
            upto = int(np.searchsorted(sorted_at, last, side="right"))
            pieces = [known.iloc[order[done:upto]]] if upto > done else []
            at = [sorted_at[done:upto]] if upto > done else []
            done = upto
            for i in members:
                table = _step_table_of(self.results[i], name)
                claims = _table_of(self.results[i], "claims") if name == "spans" else None
                question_of = {} if claims is None else dict(zip(claims["claim_id"], claims["question_id"]))
                pieces.append(table)
                at.append(position.of(_question_ids(table, name, question_of)))
            chunk = pd.concat(pieces, ignore_index=True) if len(pieces) > 1 else pieces[0]
            yield chunk.iloc[np.argsort(np.concatenate(at), kind="stable")].reset_index(drop=True)
        if done < len(known) or done == 0:  # the stored rows after the last shard (or an empty table)
            yield known.iloc[order[done:]].reset_index(drop=True)


def _tagged(table: pd.DataFrame, name: str, keys: dict[str, str], question_of: dict[str, str],
            column: str | None = None) -> pd.DataFrame:
    """`table`'s rows of the answers in `keys`, each tagged with its answer key (`column`:
    the column `keys` are looked up by, instead of the rows' question)."""
    ids = table[column] if column else _question_ids(table, name, question_of)
    tagged = table.assign(**{KEY: ids.map(keys)})
    return tagged[tagged[KEY].notna()]


def remember(reuse: Reuse, run: ShardResult | RunParts) -> None:
    """Append a segment with the rows of the answers this run evaluated (not those with a
    retryable judge failure); fold segments beyond MAX_SEGMENTS; prune old contexts.
    From RunParts the segment is written shard by shard (a row group each), never as one
    table of the run."""
    if not reuse.store or reuse.reused == len(reuse.keys):  # off, or nothing new to store
        return
    store = Path(reuse.store)
    fresh = set(reuse.fresh["question_id"]) - run.retry  # the stored ones are there already
    # under the key its results depend on: its documents, or the corpus it searched
    searched = run.searched  # a union over the run's shards: made once, not once per answer
    keep = {q: k.corpus if q in searched else k.documents for q, k in reuse.keys.items() if q in fresh}
    # the pre-search state of every answer decomposed here, under its key by passages (not again when resumed)
    before_search = {q: reuse.keys[q].passages for q in fresh if q not in reuse.resume}
    parts = list(run.results) if isinstance(run, RunParts) else [run]

    def tables(name: str) -> Iterator[pd.DataFrame]:
        for part in parts:
            claims = _table_of(part, "claims")
            question_of = dict(zip(claims["claim_id"], claims["question_id"])) if name == "spans" else {}
            yield _tagged(_step_table_of(part, name), name, keep, question_of)

    def pre_search_pieces() -> Iterator[PreSearch]:
        for part in parts:
            claims = _tagged(_table_of(part, "claims"), "claims", before_search, {})
            judged = _table_of(part, "judged")
            key_of = dict(zip(claims["claim_id"], claims[KEY]))
            yield PreSearch(claims, _tagged(judged, "judged", key_of, {}, column="claim_id"))

    _write_segment(store, {name: tables(name) for name in _TABLES},
                   lambda d: pre_search.write_pieces(d, pre_search_pieces()))
    contexts = dir_store("answer_store", store.parent)
    with file_lock(store.parent / ".lock"):  # one compactor at a time
        segments = _segments(store)
        if len(segments) > MAX_SEGMENTS:  # fold them into one, newest rows winning
            whole = _read_store(store)
            if whole is not None:
                _write_segment(store, {name: iter([t]) for name, t in whole.items()},
                               lambda d: pre_search.carry_over(segments, d))
                for seg in segments:
                    discard(seg)
        contexts.keep_newest()  # the MAX_CONTEXTS most recently used contexts
        contexts.remove_leftovers()  # contexts a kill left half-removed


def _write_segment(store: Path, tables: dict[str, Iterator[pd.DataFrame]],
                   fill_pre_search: Callable[[Path], None]) -> None:
    """A new segment of the store, appearing whole (written aside with its sums.json,
    then renamed), each table from its pieces (a row group each), with its pre-search
    directory (`fill_pre_search`). No room for it is DiskFull: the store keeps its other
    segments."""

    def fill(tmp: Path) -> None:
        for name, pieces in tables.items():
            write_parquet_pieces(tmp / f"{name}.parquet", pieces)
        fill_pre_search(tmp / pre_search.DIRECTORY)

    _segments_of(store).write_dir(f"seg-{time.time_ns():020d}-{os.getpid()}", fill)


# Not cached by Prefect: the store is itself the cache, and reading it is the point.
@task(name="reuse-answers", cache_policy=NO_CACHE)
def reuse_answers(answers: pd.DataFrame, passages: pd.DataFrame, root: str, context: str, enabled: bool,
                  corpus: CorpusIdentity = NO_CORPUS) -> Reuse:
    return split_known(answers, passages, Path(root), context, enabled, corpus)


@task(name="remember-answers", cache_policy=NO_CACHE)
def remember_answers(reuse: Reuse, answers: pd.DataFrame, results: list[SpilledShard]) -> RunParts:
    """The run's results where they lie (RunParts), its fresh answers stored for reuse."""
    run = RunParts(reuse, answers, results)
    remember(reuse, run)
    return run
