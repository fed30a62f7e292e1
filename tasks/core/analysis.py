"""Chunk analysis: what the judge reads of a text's words, made once per text, as arrays.

The index build (tasks/steps/index_build.py) is the one place that reads every chunk text;
it analyses each text never indexed before and keeps the result beside the chunk table,
in `ANALYSIS_FILE`, one row per chunk (the same rows, in the same order):

- `starts`, `ends` (int32): each word's code-point offsets in the chunk text — the words of
  `WORD_PATTERN`, exactly `verifier/tokens.word_offsets`;
- `ids` (uint64): each word's norm (`word_info(word).norm`) as `norm_id(norm)`, a hash of
  the norm's text — an id from the content, never from the order words were first seen, so
  an index updated after a corpus change holds the same ids as a fresh build;
- `flags` (uint8): each word's `CONTENT`, `NEGATION`, `NUMBER`, `ENTITY` bits.

Sentences are not kept: segmenting is two fifths of what analysing a text costs (sentencex,
~13 µs a chunk), and the judge reads a fraction of a large corpus's chunks — a passage's
sentences are found when the judge reads it (verifier/profiles.py `passage_from_words`).

and `NORMS_FILE`, every norm id with its text, sorted by id (a lookup table: after an
update it may also hold norms no chunk uses any more). The judge turns a row back into its
passage profile (verifier/profiles.py `passage_from_analysis`) and the bulk bound reads the
ids alone; neither tokenises a chunk text the index holds (`ChunkAnalysis.row_of`).

Pure; vectorised over a batch of texts: one regex pass and one dict lookup per word, in C;
word offsets from a NumPy pass over the batch's code points; the words cut out of its UTF-8
and encoded in C; a Python step per distinct word only. The arrays' key is the code that makes them (`ANALYSIS_ROOTS` in
tasks/config.py: this module and what it imports), not a constant to remember to bump.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from ragspan.tasks.core.corpus_identity import text_hashes
from ragspan.tasks.core.text import word_info
from ragspan.tasks.state import mapped_buffer

CHUNKS_FILE = "chunks.arrow"  # the index's chunk rows (tasks/steps/index_build.py ROW_SCHEMA)
ANALYSIS_FILE = "analysis.arrow"
NORMS_FILE = "norms.arrow"

CONTENT, NEGATION, NUMBER, ENTITY = 1, 2, 4, 8

ANALYSIS_SCHEMA = pa.schema([
    ("starts", pa.list_(pa.int32())), ("ends", pa.list_(pa.int32())), ("ids", pa.list_(pa.uint64())),
    ("flags", pa.list_(pa.uint8())),
])
NORMS_SCHEMA = pa.schema([("id", pa.uint64()), ("norm", pa.string())])

# WORD_PATTERN is \w+(?:[.,'’:/-]\w+)*: a word character, or one of these joining two.
_ASCII_WORD = np.array([chr(c).isalnum() or c == ord("_") for c in range(128)], dtype=bool)
_ASCII_JOINER = np.array([chr(c) in ".,':/-" for c in range(128)], dtype=bool)
_OTHER_JOINER = ord("’")


class _NormIds(dict):
    """norm → its id: the first 8 bytes of its BLAKE2b digest, little-endian. Computed once
    per distinct norm (`__missing__`): a lookup is one C-level dict access. Cleared past
    `_MAX_NORMS` entries (a bound on memory: ids are contents, the same after a clear)."""

    def __missing__(self, norm: str) -> int:
        if len(self) >= _MAX_NORMS:
            self.clear()
        value = self[norm] = int.from_bytes(hashlib.blake2b(norm.encode("utf-8"), digest_size=8).digest(), "little")
        return value


_MAX_NORMS = 1 << 21
NORM_IDS = _NormIds()
norm_id = NORM_IDS.__getitem__  # the id of a norm


class _Forms(dict):
    """A word as written → its form number in this process; per form its norm id, flags
    and norm (parallel lists). Words repeat across a corpus: each distinct one is looked
    up once (`word_info`), every later occurrence is one C-level dict lookup."""

    def __init__(self) -> None:
        super().__init__()
        self.reset()

    def reset(self) -> None:
        self.clear()
        self.ids: list[int] = []
        self.flags: list[int] = []
        self.norms: list[str] = []
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None

    def __missing__(self, word: str) -> int:
        f = word_info(word)
        bits = (0 if f.is_stop else CONTENT) | (NEGATION if f.is_negation else 0) \
            | (NUMBER if f.is_number else 0) | (ENTITY if f.is_entity else 0)
        k = self[word] = len(self.ids)
        self.ids.append(norm_id(f.norm))
        self.flags.append(bits)
        self.norms.append(f.norm)
        self._arrays = None
        return k

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, flags) per form, as arrays (made again only after new forms)."""
        if self._arrays is None:
            self._arrays = (np.array(self.ids, dtype=np.uint64), np.array(self.flags, dtype=np.uint8))
        return self._arrays


_MAX_FORMS = 1 << 21  # forms kept per process: past it, a batch starts a fresh table
_FORMS = _Forms()


def _word_bounds(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, inside) of WORD_PATTERN's matches in the text of these code points:
    maximal runs of word characters and joiners that sit between two word characters (a
    joiner never begins or ends a match, and two joiners in a row stop it); `inside`: per
    code point, whether it is in a word."""
    low = np.minimum(codes, 127)  # (every code point past ASCII is looked at apart)
    word, joins = _ASCII_WORD[low], _ASCII_JOINER[low]
    other = np.flatnonzero(codes >= 128)
    if other.size:
        distinct, back = np.unique(codes[other], return_inverse=True)
        word[other] = np.array([chr(c).isalnum() for c in distinct.tolist()], dtype=bool)[back]
        joins[other] = codes[other] == _OTHER_JOINER
    inside = word.copy()
    if len(codes) > 2:
        inside[1:-1] |= joins[1:-1] & word[:-2] & word[2:]
    edges = np.diff(inside.astype(np.int8), prepend=np.int8(0), append=np.int8(0))
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), inside


@dataclass(frozen=True)
class Analysed:
    """A batch of texts analysed: its rows (ANALYSIS_SCHEMA, one per text), the norms its
    words have (NORMS_SCHEMA, distinct, any order), and each text's index terms (its
    content words' norms joined by spaces: what BM25 indexes)."""

    rows: pa.RecordBatch
    norms: pa.Table
    terms: list[str]


def analyse(texts: list[str]) -> Analysed:
    """Every text's analysis (see the module docstring), the batch at once."""
    if len(_FORMS) > _MAX_FORMS:
        _FORMS.reset()
    joined = "\n".join(texts)  # a line break: no word crosses it
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    base = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths + 1, out=base[1:])
    codes = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
    starts, ends, inside = _word_bounds(codes)
    forms = _word_forms(joined, codes, starts, ends, inside)
    form_ids, form_flags = _FORMS.arrays()
    ids, flags = form_ids[forms], form_flags[forms]
    # words per text: a text's words start inside [base[t], base[t] + len[t])
    word_off = np.searchsorted(starts, base[:-1]).astype(np.int64)
    word_off = np.append(word_off, len(starts))
    text_of = np.repeat(np.arange(len(texts)), np.diff(word_off))
    rel_starts = (starts - base[:-1][text_of]).astype(np.int32)
    rel_ends = (ends - base[:-1][text_of]).astype(np.int32)
    rows = pa.RecordBatch.from_arrays([
        _lists(rel_starts, word_off, pa.int32()), _lists(rel_ends, word_off, pa.int32()),
        _lists(ids, word_off, pa.uint64()), _lists(flags, word_off, pa.uint8()),
    ], schema=ANALYSIS_SCHEMA)
    used = np.unique(forms)
    norms_of = _FORMS.norms
    norms = pa.table({"id": form_ids[used], "norm": [norms_of[k] for k in used.tolist()]}, schema=NORMS_SCHEMA)
    content = (flags & CONTENT).astype(bool)
    terms = _terms(forms, content, word_off, norms_of)
    return Analysed(rows, norms, terms)


def _word_forms(joined: str, codes: np.ndarray, starts: np.ndarray, ends: np.ndarray, in_word: np.ndarray
                ) -> np.ndarray:
    """Each word's form number (`_FORMS`): the words cut out of the text's UTF-8 as one Arrow
    string array, its distinct values found in C (dictionary_encode), and only those looked
    up in Python — no Python string per word."""
    utf8 = np.frombuffer(joined.encode("utf-8"), dtype=np.uint8)
    width = 1 + (codes >= 0x80).astype(np.int64) + (codes >= 0x800) + (codes >= 0x10000)  # UTF-8 bytes per code point
    at = np.zeros(len(codes) + 1, dtype=np.int64)
    np.cumsum(width, out=at[1:])
    data = utf8[np.repeat(in_word, width)]
    offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(at[ends] - at[starts], out=offsets[1:])
    words = pa.LargeStringArray.from_buffers(len(starts), pa.py_buffer(offsets), pa.py_buffer(data))
    encoded = pc.dictionary_encode(words)
    distinct = np.fromiter(map(_FORMS.__getitem__, encoded.dictionary.to_pylist()), dtype=np.int64,
                           count=len(encoded.dictionary))
    return distinct[encoded.indices.to_numpy()] if len(starts) else np.zeros(0, dtype=np.int64)


def _terms(forms: np.ndarray, content: np.ndarray, word_off: np.ndarray, norms_of: list[str]) -> list[str]:
    """Per text, its content words' norms joined by spaces (index_terms)."""
    kept = np.flatnonzero(content)
    per_text = np.searchsorted(kept, word_off)
    words = list(map(norms_of.__getitem__, forms[kept].tolist()))
    return [" ".join(words[a:b]) for a, b in zip(per_text[:-1].tolist(), per_text[1:].tolist())]


def _lists(values: np.ndarray, offsets: np.ndarray, kind: pa.DataType) -> pa.ListArray:
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32), pa.int32()), pa.array(values, kind))


# -- reading the arrays back -----------------------------------------------------------------------


@dataclass(frozen=True)
class Words:
    """One text's analysis, as NumPy arrays (views of the mapped file where they can be)."""

    starts: np.ndarray
    ends: np.ndarray
    ids: np.ndarray
    flags: np.ndarray


class ChunkAnalysis:
    """An index's analysis, memory-mapped: a chunk text → its row → its arrays, and norm ids
    → their texts. Rows are found by the text's hash and confirmed by the text itself
    (a 64-bit collision is never trusted)."""

    def __init__(self, rows: pa.Table, texts: pa.Table, norms: pa.Table, hashes: np.ndarray) -> None:
        self._columns = {name: _flat(rows.column(name)) for name in ANALYSIS_SCHEMA.names}
        # every column has the table's record batches: (values, offsets) per column, per batch
        self._by_batch = list(zip(*(self._columns[name]._batches for name in ANALYSIS_SCHEMA.names), strict=True))
        self._row_starts = self._columns["ids"]._starts
        self._texts = texts.column("text")
        self._text_starts = np.cumsum([0] + [len(c) for c in self._texts.chunks])
        order = np.argsort(hashes, kind="stable")
        self._hash_order, self._hashes = order, hashes[order]
        self._norm_ids = norms.column("id").to_numpy()
        self._norms = norms.column("norm")
        self.vocab = _Vocab(self)

    def rows_of(self, texts: list[str]) -> np.ndarray:
        """Per text, the row of a chunk with exactly that text, else -1."""
        if not texts or not len(self._hashes):
            return np.full(len(texts), -1, dtype=np.int64)
        hashes = text_hashes(texts)
        at = np.searchsorted(self._hashes, hashes)
        out = np.full(len(texts), -1, dtype=np.int64)
        for k in np.flatnonzero(at < len(self._hashes)).tolist():
            lo = int(at[k])
            while lo < len(self._hashes) and self._hashes[lo] == hashes[k]:
                row = int(self._hash_order[lo])
                if self.text(row) == texts[k]:
                    out[k] = row
                    break
                lo += 1
        return out

    def text(self, row: int) -> str:
        """The chunk text of `row`."""
        b = int(np.searchsorted(self._text_starts, row, side="right")) - 1
        return self._texts.chunks[b][row - int(self._text_starts[b])].as_py()

    def ids_of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(every word's norm id of these rows, one row after another; each row's word count)."""
        return self._columns["ids"].gather(rows)

    def words(self, row: int) -> Words:
        """The row's arrays (views of the mapped file)."""
        b = int(np.searchsorted(self._row_starts, row, side="right")) - 1
        r = row - int(self._row_starts[b])
        return Words(*(values[offsets[r]:offsets[r + 1]] for values, offsets in self._by_batch[b]))

    def norms_of(self, ids: list[int]) -> list[str]:
        """The norm of each id (every id of the index has one)."""
        at = np.searchsorted(self._norm_ids, np.asarray(ids, dtype=np.uint64))
        return self._norms.take(pa.array(at)).to_pylist()


class _Vocab(dict):
    """norm id → its norm, read from the index's norms table at first need."""

    def __init__(self, analysis: ChunkAnalysis) -> None:
        super().__init__()
        self._analysis = analysis

    def fill(self, ids: list[int] | np.ndarray) -> None:
        """Every id of `ids` looked up (those not known yet, in one pass over the table)."""
        missing = list(set(ids.tolist() if isinstance(ids, np.ndarray) else ids) - self.keys())
        if missing:
            self.update(zip(missing, self._analysis.norms_of(missing), strict=True))


class _FlatColumn:
    """A list column of a mapped table as (values, offsets) per record batch: a row's
    slice is a NumPy view, no Arrow scalar per read."""

    def __init__(self, batches: list[tuple[np.ndarray, np.ndarray]], starts: np.ndarray) -> None:
        self._batches, self._starts = batches, starts

    def row(self, row: int) -> np.ndarray:
        b = int(np.searchsorted(self._starts, row, side="right")) - 1
        values, offsets = self._batches[b]
        r = row - int(self._starts[b])
        return values[offsets[r]:offsets[r + 1]]

    def gather(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the rows' values one after another, each row's length): one pass per record
        batch, no Python step per row."""
        rows = np.asarray(rows, dtype=np.int64)
        which = np.searchsorted(self._starts, rows, side="right") - 1
        lengths = np.zeros(len(rows), dtype=np.int64)
        parts: list[tuple[np.ndarray, np.ndarray]] = []
        for b in np.unique(which).tolist():
            at = np.flatnonzero(which == b)
            values, offsets = self._batches[b]
            r = rows[at] - self._starts[b]
            lo, hi = offsets[r].astype(np.int64), offsets[r + 1].astype(np.int64)
            lengths[at] = hi - lo
            parts.append((at, values[_ranges(lo, hi)]))
        if len(parts) == 1:
            return parts[0][1], lengths
        # rows in several record batches: put each row's values back in the order asked
        ends = np.cumsum(lengths)
        out = np.empty(int(ends[-1]) if len(ends) else 0, dtype=parts[0][1].dtype if parts else np.uint64)
        for at, vals in parts:
            out[_ranges(ends[at] - lengths[at], ends[at])] = vals
        return out, lengths


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """lo[0]..hi[0]-1, lo[1]..hi[1]-1, … as one index array."""
    n = hi - lo
    total = int(n.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    step = np.ones(total, dtype=np.int64)
    heads = np.cumsum(n) - n  # where each range begins in the output
    nonempty = n > 0
    step[heads[nonempty]] = lo[nonempty] - np.r_[0, (hi[nonempty] - 1)[:-1]]
    return np.cumsum(step)


def _flat(column: pa.ChunkedArray) -> _FlatColumn:
    batches, starts = [], [0]
    for chunk in column.chunks:
        offsets = chunk.offsets.to_numpy()
        batches.append((chunk.values.to_numpy(zero_copy_only=False), offsets))
        starts.append(starts[-1] + len(chunk))
    return _FlatColumn(batches, np.array(starts, dtype=np.int64))


@lru_cache(maxsize=2)
def open_analysis(index_dir: str) -> ChunkAnalysis | None:
    """The analysis of the corpus index at `index_dir`, memory-mapped, once per process;
    None when it has none (an index written before it was kept)."""
    root = Path(index_dir)
    if not (root / ANALYSIS_FILE).is_file() or not (root / NORMS_FILE).is_file():
        return None
    chunks = _mapped_table(root / CHUNKS_FILE)
    return ChunkAnalysis(_mapped_table(root / ANALYSIS_FILE), chunks.select(["text"]),
                         _mapped_table(root / NORMS_FILE), chunks.column("text_hash").to_numpy())


def _mapped_table(path: Path) -> pa.Table:
    return pa.ipc.open_file(pa.BufferReader(mapped_buffer(path))).read_all()
