"""What the local judge reads of a passage's text, computed once: its words and sentences.

A passage is read as its words (`WORD_PATTERN` matches, with code-point offsets), what the
judge checks of each (`word_info`, a function of the word as written) and its sentences as
token ranges. `analyse` computes that from the text; the verifier's `passage_profile`
(tasks/judges/verifier/profiles.py) is built from it, and the corpus index keeps it for
every chunk (tasks/steps/index_build.py writes `ANALYSIS_FILE` and `FORMS_FILE` beside
`CHUNKS_FILE`), so a retrieved chunk is read from arrays instead of tokenised again in
every shard and worker (`ChunkAnalyses`, docs/decisions.md #63).

Stored compactly, because a word costs more than its text (the state dir must stay
within 4× the corpus text): per word only its start and its *form* — the word as written.
Everything else is a function of the form and kept once per distinct form in the forms
table: its length (a word's end is start + length), its norm (the Snowball stem or
canonical number), the norm's id (64-bit hash of the norm string: the index's stem ids)
and its flags. A form's id is the 64-bit hash of its string; the forms table is sorted by
it, and a word stores its form's place in that table (uint32): ids and places come from
the content, never from the order words were first seen, so an index updated from a
previous one equals a fresh build. Offsets and sentence bounds are uint16 when every chunk
of the index is shorter than 65,536 code points (int32 otherwise): 6 bytes a word, about
the text's own size (12 with 64-bit ids and int32 offsets: twice it).
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from operator import add
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from ragspan.tasks.core.arrow_rows import BatchedRows
from ragspan.tasks.core.corpus_identity import text_hashes
from ragspan.tasks.core.text import WORD_PATTERN, WordInfo, sentence_spans, word_info
from ragspan.tasks.state import mapped_buffer

CHUNKS_FILE = "chunks.arrow"  # the index's chunk rows (tasks/steps/index_build.py)
ANALYSIS_FILE = "analysis.arrow"  # per chunk row, in CHUNKS_FILE's order: its words and sentences
FORMS_FILE = "forms.arrow"  # per distinct word form of the index, sorted by form id

def analysis_schema(offsets: pa.DataType | None = None, forms: pa.DataType | None = None) -> pa.Schema:
    """ANALYSIS_FILE's columns: `forms` uint64 (form ids, the default) while an index is
    written, uint32 (places in the forms table) on disk; `offsets` offset_type's (default int32)."""
    offsets, forms = offsets or pa.int32(), forms or pa.uint64()
    return pa.schema([
        ("word_start", pa.list_(offsets)),  # code-point offset of each word
        ("word_form", pa.list_(forms)),  # each word's form
        ("sentences", pa.list_(offsets)),  # token ranges of the sentences, flattened: i0, j0, i1, j1, ...
    ])


ANALYSIS_SCHEMA = analysis_schema()  # as analysed() makes it
_NARROW = 65_535


def offset_type(longest: int) -> pa.DataType:
    """The offsets' type for an index whose longest chunk has `longest` code points: every
    word start and token count fits in 16 bits below 65,536."""
    return pa.uint16() if longest <= _NARROW else pa.int32()
FORMS_SCHEMA = pa.schema([
    ("form_id", pa.uint64()), ("form", pa.string()), ("norm", pa.string()), ("norm_id", pa.uint64()),
    ("flags", pa.uint8()),
])

# FORMS_SCHEMA's flags: WordInfo's booleans the judge reads per word.
CONTENT, NEGATION, NUMBER, ENTITY = 1, 2, 4, 8


# ---------------------------------------------------------------------------- from the text


def word_offsets(text: str) -> tuple[list[str], list[int], list[int]]:
    """(the words of `text`, their starts, their ends). A WORD_PATTERN match begins and
    ends with a word character, so it is the word as written (no punctuation to strip).

    The regex runs in C (findall, no match objects); each start is found with str.find
    from the previous match's end — exact, because everything the regex skipped between
    two matches is non-word."""
    matches = WORD_PATTERN.findall(text)
    starts: list[int] = []
    pos, find, append = 0, text.find, starts.append
    for m in matches:
        pos = find(m, pos)
        append(pos)
        pos += len(m)
    return matches, starts, list(map(add, starts, map(len, matches)))


def sentence_bounds(text: str, starts: Sequence[int]) -> list[tuple[int, int]]:
    """The sentences of `text` (sentence_spans) as token ranges [i, j) over the words
    starting at `starts`; one range over every word when no sentence holds a word."""
    bounds = []
    for s, e in sentence_spans(text):
        i, j = bisect_left(starts, s), bisect_left(starts, e)
        if j > i:
            bounds.append((i, j))
    if not bounds and starts:
        bounds = [(0, len(starts))]
    return bounds


@dataclass(frozen=True, slots=True)
class Analysis:
    """One text's words (as written), their offsets and its sentences as token ranges."""

    forms: list[str]
    starts: list[int]
    ends: list[int]
    sentences: list[tuple[int, int]]


def analyse(text: str) -> Analysis:
    forms, starts, ends = word_offsets(text)
    return Analysis(forms, starts, ends, sentence_bounds(text, starts))


def flags_of(info: WordInfo) -> int:
    return (CONTENT * (not info.is_stop) | NEGATION * info.is_negation | NUMBER * info.is_number
            | ENTITY * info.is_entity)


# ---------------------------------------------------------------------------- as arrays


def ids_of(strings: Sequence[str]) -> np.ndarray:
    """The 64-bit content id of each string (SipHash of its UTF-8, as text hashes)."""
    return text_hashes(list(strings)) if len(strings) else np.zeros(0, dtype=np.uint64)


@dataclass(frozen=True)
class AnalysedTexts:
    """Texts' analyses as ANALYSIS_SCHEMA columns, and the distinct forms they use (id,
    string): what a tokenising worker sends back."""

    table: pa.Table
    form_ids: np.ndarray
    forms: list[str]


def analysed(texts: Sequence[str]) -> AnalysedTexts:
    """`analyse` of each text, as arrays."""
    return as_arrays([analyse(t) for t in texts])


def as_arrays(every: Sequence[Analysis]) -> AnalysedTexts:
    """Analyses as arrays: flattened in C (chain), each distinct form hashed once."""
    all_forms = np.fromiter(chain.from_iterable(a.forms for a in every), dtype=object)
    codes, distinct = pd.factorize(all_forms) if len(all_forms) else (np.zeros(0, np.int64), np.zeros(0, object))
    forms = list(distinct)
    ids = ids_of(forms)
    lengths = np.fromiter((len(a.forms) for a in every), dtype=np.int64, count=len(every))
    offsets = pa.array(np.r_[0, np.cumsum(lengths)].astype(np.int32))
    flat_forms = pa.array(ids[codes], type=pa.uint64())
    flat_starts = pa.array(np.fromiter(chain.from_iterable(a.starts for a in every), dtype=np.int32), type=pa.int32())
    s_len = np.fromiter((2 * len(a.sentences) for a in every), dtype=np.int64, count=len(every))
    s_offsets = pa.array(np.r_[0, np.cumsum(s_len)].astype(np.int32))
    flat_sents = pa.array(np.fromiter(chain.from_iterable(chain.from_iterable(a.sentences) for a in every),
                                      dtype=np.int32), type=pa.int32())
    table = pa.table({
        "word_start": pa.ListArray.from_arrays(offsets, flat_starts),
        "word_form": pa.ListArray.from_arrays(offsets, flat_forms),
        "sentences": pa.ListArray.from_arrays(s_offsets, flat_sents),
    }, schema=ANALYSIS_SCHEMA)
    return AnalysedTexts(table, ids, forms)


def joined(parts: Sequence[AnalysedTexts]) -> AnalysedTexts:
    """Several texts' arrays as one (their tables one after the other, their forms once)."""
    if len(parts) == 1:
        return parts[0]
    ids = np.concatenate([p.form_ids for p in parts]) if parts else np.zeros(0, dtype=np.uint64)
    forms = [f for p in parts for f in p.forms]
    _, first = np.unique(ids, return_index=True)
    table = pa.concat_tables([p.table for p in parts]) if parts else ANALYSIS_SCHEMA.empty_table()
    return AnalysedTexts(table, ids[first], [forms[k] for k in first.tolist()])


def forms_table(form_ids: np.ndarray, forms: list[str]) -> pa.Table:
    """FORMS_FILE's table of these distinct forms (ids unique), sorted by id: each form's
    norm, norm id and flags computed from the form alone — the same whoever wrote it."""
    order = np.argsort(form_ids, kind="stable")
    ids = form_ids[order]
    ordered = [forms[k] for k in order.tolist()]
    infos = [word_info(f) for f in ordered]
    norms = [i.norm for i in infos]
    return pa.table({
        "form_id": pa.array(ids, type=pa.uint64()), "form": ordered, "norm": norms,
        "norm_id": pa.array(ids_of(norms), type=pa.uint64()),
        "flags": pa.array([flags_of(i) for i in infos], type=pa.uint8()),
    }, schema=FORMS_SCHEMA)


def with_places(table: pa.Table, form_ids: np.ndarray) -> pa.Table:
    """`table` (form ids) with each word's form as its place in `form_ids` (sorted, holding
    every id of the table): what ANALYSIS_FILE stores."""
    forms = table.column("word_form").combine_chunks()
    places = np.searchsorted(form_ids, forms.values.to_numpy()).astype(np.uint32)
    column = pa.ListArray.from_arrays(forms.offsets, pa.array(places, type=pa.uint32()))
    return table.set_column(1, pa.field("word_form", column.type), column)


def with_ids(table: pa.Table, form_ids: np.ndarray, offsets: pa.DataType) -> pa.Table:
    """A stored table (form places into `form_ids`) with form ids again, offsets as `offsets`:
    rows of one index taken into another."""
    forms = table.column("word_form").combine_chunks()
    ids = form_ids[forms.values.to_numpy().astype(np.int64)] if len(forms.values) else np.zeros(0, np.uint64)
    column = pa.ListArray.from_arrays(forms.offsets, pa.array(ids, type=pa.uint64()))
    return table.set_column(1, pa.field("word_form", column.type), column).cast(analysis_schema(offsets))


# ---------------------------------------------------------------------------- read back


@dataclass(frozen=True, slots=True)
class Words:
    """A chunk's analysis read back: what `analyse` and `word_info` give for its text."""

    starts: list[int]
    ends: list[int]
    infos: list[WordInfo]  # per word, its form's word_info as stored (norm and flags)
    sentences: list[tuple[int, int]]

    @property
    def norms(self) -> list[str]:
        return [i.norm for i in self.infos]

    @property
    def flags(self) -> list[int]:
        return list(map(flags_of, self.infos))


def _info(norm: str, flags: int) -> WordInfo:
    return WordInfo(norm, bool(flags & NUMBER), bool(flags & ENTITY), bool(flags & NEGATION), not flags & CONTENT)


def _mapped(path: Path) -> pa.Table:
    return pa.ipc.open_file(pa.BufferReader(mapped_buffer(path))).read_all()


class ChunkAnalyses:
    """An index's chunk analyses, memory-mapped: the chunk row holding a given text, and
    that row's words. Reads only the rows asked for (their pages, as the texts')."""

    def __init__(self, index_dir: Path) -> None:
        chunks = _mapped(index_dir / CHUNKS_FILE)
        self._texts = BatchedRows(chunks)  # a row's text taken from its own record batch: no copy of the file
        hashes = chunks.column("text_hash").to_numpy()
        self._order = np.argsort(hashes, kind="stable")
        self._hashes = hashes[self._order]
        table = _mapped(index_dir / ANALYSIS_FILE)
        self._starts = [self._list(table, "word_start", b) for b in range(table.column("word_start").num_chunks)]
        self._forms = [self._list(table, "word_form", b) for b in range(table.column("word_form").num_chunks)]
        self._sents = [self._list(table, "sentences", b) for b in range(table.column("sentences").num_chunks)]
        self._batch_lo = np.cumsum([0] + [len(o) - 1 for o, _ in self._starts]).tolist()
        forms = _mapped(index_dir / FORMS_FILE)
        self._forms_table = forms
        self._lengths: list[int] = []  # per form: its length and its WordInfo, read at the first row asked for
        self._infos: list[WordInfo] = []
        self._lock = threading.Lock()

    @staticmethod
    def _list(table: pa.Table, name: str, batch: int) -> tuple[np.ndarray, np.ndarray]:
        """(offsets, values) of one record batch's list column: views of the mapped file."""
        arr = table.column(name).chunk(batch)
        return arr.offsets.to_numpy(), arr.values.to_numpy()

    def rows_of(self, texts: Sequence[str]) -> np.ndarray:
        """Per text, a chunk row whose text is exactly it, else -1 (its hash found, the
        texts compared: a 64-bit collision is never trusted)."""
        if not len(texts) or not len(self._hashes):
            return np.full(len(texts), -1, dtype=np.int64)
        hashes = ids_of(texts)
        at = np.minimum(np.searchsorted(self._hashes, hashes), len(self._hashes) - 1)
        rows = np.where(self._hashes[at] == hashes, self._order[at], -1)
        found = np.flatnonzero(rows >= 0)
        if len(found):
            held = self._texts.take(rows[found], ["text"]).column("text").to_pylist()
            rows[found[[h != texts[k] for h, k in zip(held, found.tolist())]]] = -1
        return rows

    def _per_form(self) -> tuple[list[int], list[WordInfo]]:
        """Every form's length and WordInfo as Python lists, so a row's words are one
        C-level list lookup each (NumPy's fancy indexing of ~100 values costs more than
        that). One WordInfo per distinct (norm, flags): a few MB at 100k chunks."""
        with self._lock:
            if not self._infos and self._forms_table.num_rows:
                one: dict[tuple[str, int], WordInfo] = {}
                norms, flags = self._forms_table.column("norm").to_pylist(), self._forms_table.column("flags").to_pylist()
                self._infos = [one.get(k) or one.setdefault(k, _info(*k)) for k in zip(norms, flags)]
                self._lengths = pc.utf8_length(self._forms_table.column("form")).to_pylist()
        return self._lengths, self._infos

    def words(self, row: int) -> Words:
        """The words and sentences of chunk row `row`."""
        lengths, infos = self._per_form()
        b = bisect_right(self._batch_lo, row) - 1
        r = row - self._batch_lo[b]
        (offsets, starts), (_, forms), (s_offsets, sents) = self._starts[b], self._forms[b], self._sents[b]
        lo, hi = offsets[r], offsets[r + 1]
        start = starts[lo:hi].tolist()
        places = forms[lo:hi].tolist()
        bounds = sents[s_offsets[r]:s_offsets[r + 1]].tolist()
        return Words(start, list(map(add, start, map(lengths.__getitem__, places))), list(map(infos.__getitem__, places)),
                     list(zip(bounds[0::2], bounds[1::2])))
