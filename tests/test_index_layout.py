"""The chunk windows' layout over the index's arrays (tasks/steps/index_layout.py) answers
as the Python Layout does (tasks/core/chunk_split.py): the same chunk before, after and
overlapping any span, on chunk tables with overlaps, gaps, repeated starts and shuffled rows."""

from __future__ import annotations

import random

import pyarrow as pa
from ragspan.tasks.core.chunk_split import Chunk, Layout
from ragspan.tasks.steps.index_layout import IndexLayout


def _chunks(rng: random.Random) -> list[Chunk]:
    out = []
    for d in range(rng.randint(1, 6)):
        at = 0
        for i in range(rng.randint(1, 8)):
            start = max(0, at - rng.choice((0, 0, 5, 20)))  # overlaps and repeated starts
            end = start + rng.randint(1, 60)
            out.append(Chunk(f"d{d}#{i}", f"d{d}", start, end))
            at = end + rng.choice((0, 0, 3))  # gaps between chunks
    rng.shuffle(out)
    return out


def _table(chunks: list[Chunk], batch: int) -> pa.Table:
    """As the index stores it: one record batch per `batch` rows."""
    columns = {"chunk_id": [c.chunk_id for c in chunks], "doc_id": [c.doc_id for c in chunks],
               "char_start": [c.start for c in chunks], "char_end": [c.end for c in chunks]}
    whole = pa.table(columns)
    return pa.Table.from_batches(whole.to_batches(max_chunksize=batch))


def test_the_array_layout_answers_as_the_python_layout():
    rng = random.Random(7)
    asked = 0
    for _ in range(200):
        chunks = _chunks(rng)
        python, arrays = Layout(chunks), IndexLayout(_table(chunks, rng.randint(1, 5)))
        for _ in range(20):
            doc = rng.choice([c.doc_id for c in chunks] + ["nowhere"])
            start = rng.randint(0, 200)
            end = start + rng.randint(1, 80)
            assert arrays.before(doc, start, end) == python.before(doc, start, end)
            assert arrays.after(doc, start, end) == python.after(doc, start, end)
            assert arrays.overlapping(doc, start, end) == python.overlapping(doc, start, end)
            asked += 1
        for c in chunks:  # the rows of what it returned are the table's
            got = arrays.after(c.doc_id, c.start - 1, c.start)
            if got is not None:
                assert chunks[arrays.row_of(got.chunk_id)] == got
    assert asked == 4000


def test_rows_taken_batch_by_batch_equal_a_take_of_the_table():
    from ragspan.tasks.core.arrow_rows import BatchedRows

    rng = random.Random(3)
    table = pa.Table.from_batches(pa.table({"a": list(range(100)), "t": [f"text {i}" for i in range(100)]})
                                  .to_batches(max_chunksize=7))
    rows = BatchedRows(table)
    for _ in range(50):
        wanted = [rng.randrange(100) for _ in range(rng.randint(0, 30))]  # any order, repeats
        assert rows.take(wanted, ["t", "a"]).equals(table.select(["t", "a"]).take(pa.array(wanted, pa.int64())))
