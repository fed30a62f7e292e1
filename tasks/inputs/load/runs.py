"""A run file: answers, retrieved items in rank order, the context window, bring-your-own claims."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import pandas as pd
from ragspan.tasks.core.among import among
from ragspan.tasks.core.locate import CorpusTextIndex
from ragspan.tasks.core.schemas import Answers, Retrieved
from ragspan.tasks.errors import InputError
from ragspan.tasks.inputs.load.corpus import _relpath
from ragspan.tasks.inputs.load.files import (
    _ITEM_KEYS,
    ITEM_FORMS,
    ITEM_OPTIONAL_KEYS,
    RUN_KEYS,
    _decode,
    _jsonl_records,
)
from ragspan.tasks.inputs.load.problems import _describe, _validate_schema

# --------------------------------------------------------------------------- runs


def _empty_answers() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run": pd.Series([], dtype="str"),
            "question_id": pd.Series([], dtype="str"),
            "question": pd.Series([], dtype="str"),
            "answer": pd.Series([], dtype="str"),
            "claims": pd.Series([], dtype=object),
        }
    )


def _retrieved_frame(cols: dict[str, list]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run": pd.Series(cols["run"], dtype="str"),
            "question_id": pd.Series(cols["question_id"], dtype="str"),
            "rank": pd.Series(cols["rank"], dtype="int64"),
            "chunk_id": pd.Series(cols["chunk_id"], dtype="str"),
            "doc_id": pd.Series(cols["doc_id"], dtype="str"),
            "char_start": pd.Series(cols["char_start"], dtype="int64"),
            "char_end": pd.Series(cols["char_end"], dtype="int64"),
            "score": pd.Series(cols["score"], dtype="float64"),
            "in_context": pd.Series(cols["in_context"], dtype="bool"),
        }
    )


_RETRIEVED_COLS = (
    "run",
    "question_id",
    "rank",
    "chunk_id",
    "doc_id",
    "char_start",
    "char_end",
    "score",
    "in_context",
)


def run_names(data_dir: str | Path) -> list[str]:
    """The runs a data directory holds: the names of its `runs/<name>.jsonl` files, sorted."""
    folder = Path(data_dir) / "runs"
    return sorted(p.name[: -len(".jsonl")] for p in folder.glob("*.jsonl") if p.is_file()) if folder.is_dir() else []


def _run_path(data_dir: Path, run: str) -> Path:
    if not run or "/" in run or "\\" in run or run.startswith("."):
        raise InputError(data_dir / "runs", None, None, f"invalid run name {run!r}")
    path = data_dir / "runs" / f"{run}.jsonl"
    if not path.is_file():
        others = (
            sorted(p.name for p in (data_dir / "runs").glob(f"{run}.*"))
            if (data_dir / "runs").is_dir()
            else []
        )
        there = run_names(data_dir)
        hint = (f" (found {', '.join(others)}: runs must be JSONL)" if others else
                f" (runs here: {', '.join(there)})" if there else "")
        raise InputError(
            path,
            None,
            None,
            f"run file not found: runs are JSONL files runs/<run>.jsonl, one record per question{hint}",
        )
    return path


class _RunBuilder:
    """Validates run records one by one (first error in file order) and builds the tables."""

    def __init__(
        self,
        path: Path,
        run: str,
        corpus: pd.DataFrame,
        chunks: pd.DataFrame,
        questions: pd.DataFrame,
        default_context_k: int,
        records: list[dict],
    ):
        self.path, self.run, self.default_k = path, run, default_context_k
        self.qids = set(questions["question_id"].tolist())
        # Lookups for the chunks and documents the run names only (`_named`): a dict of every
        # chunk's place costs ~2 GB of heap at 10M chunks; a run names ~10 per answer.
        named_chunks, named_docs = _named(records)
        # Lengths, not texts: the corpus is memory-mapped (tasks/inputs/load/corpus_store.py);
        # its texts become Python strings only if an item gives a text to find.
        named = corpus[among(corpus["doc_id"], named_docs).to_numpy(dtype=bool)]
        self.doc_len = dict(zip(named["doc_id"].tolist(), named["text"].str.len().tolist()))
        self._corpus = corpus
        self._index: CorpusTextIndex | None = None
        self._chunks = chunks
        # An ad-hoc chunk's id ("doc@s-e") must not be a user chunk's: those with an "@".
        at = chunks["chunk_id"].str.contains("@", regex=False).to_numpy(dtype=bool)
        wanted = among(chunks["chunk_id"], named_chunks).to_numpy(dtype=bool) | at
        self.chunk = _places(chunks[wanted])
        self.by_span: dict[tuple[str, int, int], str] = {}
        self._spans_of: set[str] = set()  # documents whose chunks by_span holds
        self.spans_for(named_docs)
        self.adhoc: list[tuple[str, str, int, int]] = []
        self.answers: dict[str, list] = {"run": [], "question_id": [], "answer": [], "claims": []}
        self.answer_rows: list[int] = []
        self.ret: dict[str, list] = {k: [] for k in _RETRIEVED_COLS}
        self.ret_rows: list[int] = []
        self.seen: dict[str, int] = {}

    def err(self, row: int, field: str | None, message: str) -> InputError:
        return InputError(self.path, row, field, message)

    def spans_for(self, doc_ids: set[str]) -> None:
        """by_span: (doc_id, start, end) → the first chunk with these offsets, for the chunks
        of `doc_ids` (in one pass over the chunk table)."""
        new = doc_ids - self._spans_of
        if not new:
            return
        self._spans_of |= new
        mine = self._chunks[among(self._chunks["doc_id"], new).to_numpy(dtype=bool)]
        for c, (d, s, e) in _places(mine).items():
            self.by_span.setdefault((d, s, e), c)  # the first chunk with these offsets

    def chunk_for(self, doc_id: str, s: int, e: int) -> str:
        """Reuse a chunk with exactly these offsets, else register an ad-hoc one."""
        self.spans_for({doc_id})  # a text found in a document the run did not name
        cid = self.by_span.get((doc_id, s, e))
        if cid is None:
            cid = base = f"{doc_id}@{s}-{e}"
            n = 1
            while cid in self.chunk:  # a user chunk already has this id with other offsets
                n += 1
                cid = f"{base}~{n}"
            self.chunk[cid] = (doc_id, s, e)
            self.by_span[(doc_id, s, e)] = cid
            self.adhoc.append((cid, doc_id, s, e))
        return cid

    def record(self, row: int, rec: dict) -> None:
        for key in rec:
            if key not in RUN_KEYS:
                raise self.err(
                    row, key, f"unknown key (a record has: {', '.join(sorted(RUN_KEYS))})"
                )
        qid = rec.get("question_id")
        if not isinstance(qid, str) or not qid.strip():
            raise self.err(row, "question_id", f"expected a non-empty string, got {_describe(qid)}")
        if qid not in self.qids:
            raise self.err(row, "question_id", f"unknown question_id {qid!r} (not in questions)")
        if qid in self.seen:
            raise self.err(
                row, "question_id", f"duplicate question_id {qid!r} (first at row {self.seen[qid]})"
            )
        self.seen[qid] = row
        answer = rec.get("answer")
        if not isinstance(answer, str):
            raise self.err(row, "answer", f"expected a string, got {_describe(answer)}")
        if not answer.strip():
            raise self.err(
                row, "answer", "empty string" if not answer else "whitespace-only string"
            )
        context_k = rec.get("context_k")
        if context_k is not None and (
            not isinstance(context_k, int) or isinstance(context_k, bool) or context_k < 0
        ):
            raise self.err(
                row, "context_k", f"expected an integer >= 0, got {_describe(context_k)}"
            )
        claims = rec.get("claims")
        if claims is not None:
            if not isinstance(claims, list):
                raise self.err(
                    row, "claims", f"expected a list of strings, got {_describe(claims)}"
                )
            for j, c in enumerate(claims):
                if not isinstance(c, str) or not c.strip():
                    raise self.err(
                        row, f"claims[{j}]", f"expected a non-empty string, got {_describe(c)}"
                    )
            claims = list(claims)
        if "retrieved" not in rec:
            raise self.err(row, "retrieved", "missing (give [] when nothing was retrieved)")
        items = rec["retrieved"]
        if not isinstance(items, list):
            raise self.err(row, "retrieved", f"expected a list, got {_describe(items)}")

        resolved = [self.item(row, j, it) for j, it in enumerate(items)]
        flags = [r[4] for r in resolved]
        given = [f is not None for f in flags]
        if any(given) and not all(given):
            j = given.index(False)
            raise self.err(
                row,
                f"retrieved[{j}].in_context",
                "missing: when some retrieved items give in_context, all must",
            )
        k = self.default_k if context_k is None else context_k
        for j, (cid, d, s, e, flag, score) in enumerate(resolved):
            rank = j + 1
            if flag is not None and context_k is not None and flag != (rank <= context_k):
                raise self.err(
                    row,
                    f"retrieved[{j}].in_context",
                    f"in_context={flag} contradicts context_k={context_k} at rank {rank}",
                )
            r = self.ret
            r["run"].append(self.run)
            r["question_id"].append(qid)
            r["rank"].append(rank)
            r["chunk_id"].append(cid)
            r["doc_id"].append(d)
            r["char_start"].append(s)
            r["char_end"].append(e)
            r["score"].append(score)
            r["in_context"].append(flag if flag is not None else rank <= k)
            self.ret_rows.append(row)
        a = self.answers
        a["run"].append(self.run)
        a["question_id"].append(qid)
        a["answer"].append(answer)
        a["claims"].append(claims)
        self.answer_rows.append(row)

    def item(
        self, row: int, j: int, it: Any
    ) -> tuple[str, str, int, int, bool | None, float | None]:
        f = f"retrieved[{j}]"
        rank = f"rank {j + 1}"
        if not isinstance(it, dict):
            raise self.err(row, f, f"expected an object ({rank}), got {_describe(it)}")
        for key in it:
            if key not in _ITEM_KEYS:
                raise self.err(
                    row,
                    f"{f}.{key}",
                    f"unknown key in a retrieved item ({rank}); items are one of {', '.join(ITEM_FORMS)}"
                    " with optional 'score', 'in_context'",
                )
        score = it.get("score")
        if score is not None:
            if isinstance(score, bool) or not isinstance(score, (int, float)):
                raise self.err(
                    row, f"{f}.score", f"expected a number ({rank}), got {_describe(score)}"
                )
            try:
                score = float(score)
            except OverflowError:  # an integer beyond the float range
                score = math.inf
            if not math.isfinite(score):
                raise self.err(
                    row, f"{f}.score", f"expected a finite number ({rank}), got {score}"
                )
        flag = it.get("in_context")
        if flag is not None and not isinstance(flag, bool):
            raise self.err(
                row, f"{f}.in_context", f"expected true or false ({rank}), got {_describe(flag)}"
            )

        keys = set(it) - ITEM_OPTIONAL_KEYS
        if keys == {"chunk_id"}:
            cid = it["chunk_id"]
            if not isinstance(cid, str):
                raise self.err(
                    row, f"{f}.chunk_id", f"expected a string ({rank}), got {_describe(cid)}"
                )
            hit = self.chunk.get(cid)
            if hit is None:
                raise self.err(row, f"{f}.chunk_id", f"unknown chunk_id {cid!r} ({rank})")
            return (cid, *hit, flag, score)
        if keys == {"doc_id", "char_start", "char_end"}:
            d = self.doc_id(row, f, rank, it["doc_id"])
            s, e = it["char_start"], it["char_end"]
            for name, v in (("char_start", s), ("char_end", e)):
                if not isinstance(v, int) or isinstance(v, bool):
                    raise self.err(
                        row, f"{f}.{name}", f"expected an integer ({rank}), got {_describe(v)}"
                    )
            n = self.doc_len[d]
            if not 0 <= s < e <= n:
                field = "char_end" if 0 <= s < n else "char_start"
                raise self.err(
                    row,
                    f"{f}.{field}",
                    f"offsets [{s}, {e}) out of range or reversed ({rank}): document {d!r} has {n} characters",
                )
            return (self.chunk_for(d, s, e), d, s, e, flag, score)
        if keys in ({"text"}, {"text", "doc_id"}):
            d = self.doc_id(row, f, rank, it["doc_id"]) if "doc_id" in it else None
            text = it["text"]
            if not isinstance(text, str) or not text.strip():
                raise self.err(
                    row, f"{f}.text", f"expected a non-empty string ({rank}), got {_describe(text)}"
                )
            hit = self.text_index().locate(text, d)
            if hit is None:
                where = f"document {d!r}" if d is not None else "the corpus"
                raise self.err(
                    row,
                    f"{f}.text",
                    f"retrieved text not found in {where} ({rank}), "
                    "not even with whitespace normalised",
                )
            d, s, e = hit
            return (self.chunk_for(d, s, e), d, s, e, flag, score)
        raise self.err(
            row,
            f,
            f"ambiguous or incomplete item ({rank}) with keys {sorted(keys)}: "
            f"give exactly one of {', '.join(ITEM_FORMS)}",
        )

    def text_index(self) -> CorpusTextIndex:
        """The corpus prepared for finding texts, at the first item that gives one."""
        if self._index is None:
            self._index = CorpusTextIndex(self._corpus["doc_id"].tolist(), self._corpus["text"].tolist())
        return self._index

    def doc_id(self, row: int, f: str, rank: str, d: Any) -> str:
        if not isinstance(d, str):
            raise self.err(row, f"{f}.doc_id", f"expected a string ({rank}), got {_describe(d)}")
        if d not in self.doc_len:
            raise self.err(row, f"{f}.doc_id", f"unknown doc_id {d!r} ({rank})")
        return d


def _named(records: list[dict]) -> tuple[set[str], set[str]]:
    """The chunk_ids and doc_ids the run's retrieved items give (whatever their form: a
    malformed one is reported by _RunBuilder in file order)."""
    chunk_ids: set[str] = set()
    doc_ids: set[str] = set()
    for rec in records:
        items = rec.get("retrieved")
        for it in items if isinstance(items, list) else ():
            if isinstance(it, dict):
                if isinstance(it.get("chunk_id"), str):
                    chunk_ids.add(it["chunk_id"])
                if isinstance(it.get("doc_id"), str):
                    doc_ids.add(it["doc_id"])
    return chunk_ids, doc_ids


def _places(chunks: pd.DataFrame) -> dict[str, tuple[str, int, int]]:
    """chunk_id → (doc_id, char_start, char_end), in table order."""
    columns = (chunks[c].tolist() for c in ("chunk_id", "doc_id", "char_start", "char_end"))
    return {c: (d, s, e) for c, d, s, e in zip(*columns)}


def _load_run(
    data_dir: Path,
    run: str,
    corpus: pd.DataFrame,
    chunks: pd.DataFrame,
    questions: pd.DataFrame,
    default_context_k: int,
) -> tuple[tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame], dict[str, str]]:
    path = _run_path(data_dir, run)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(path, None, None, f"cannot read file: {exc.strerror or exc}") from None
    records, lines = _jsonl_records(path, _decode(path, raw, 0))
    if not records:
        raise InputError(path, None, None, "no records")
    b = _RunBuilder(path, run, corpus, chunks, questions, default_context_k, records)
    for row, rec in zip(lines, records):
        b.record(row, rec)

    answers = pd.DataFrame(
        {
            "run": pd.Series(b.answers["run"], dtype="str"),
            "question_id": pd.Series(b.answers["question_id"], dtype="str"),
            "question": pd.Series(b.answers["question_id"], dtype="str").map(
                questions.set_index("question_id")["question"]).astype("str"),
            "answer": pd.Series(b.answers["answer"], dtype="str"),
            "claims": pd.Series(b.answers["claims"], dtype=object),
        }
    )
    answers = _validate_schema(Answers, answers, path, b.answer_rows)
    retrieved = _validate_schema(Retrieved, _retrieved_frame(b.ret), path, b.ret_rows)
    if b.adhoc:
        extra = pd.DataFrame(b.adhoc, columns=["chunk_id", "doc_id", "char_start", "char_end"])
        extra = extra.astype(
            {"chunk_id": "str", "doc_id": "str", "char_start": "int64", "char_end": "int64"}
        )
        chunks = pd.concat([chunks, extra], ignore_index=True)
    return (answers, retrieved, chunks), {_relpath(path, data_dir): hashlib.md5(raw).hexdigest()}
