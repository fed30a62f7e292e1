"""Code-point offsets → UTF-8 byte offsets (tasks/core/byte_offsets.py): slicing the encoded
document at the byte offsets gives the encoded span, for any Unicode."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from ragspan.tasks.core.byte_offsets import utf8_offset, utf8_offsets, utf8_spans

ATOMS = ["a", " ", "\r\n", "é", "e\u0301", "👩‍👩‍👧", "🙂", "東京", "שלום", "مرحبا", "\u00a0", "\u00ad", "—", "𝔘", "\x00"]
texts = st.lists(st.sampled_from(ATOMS) | st.text(max_size=3), min_size=1, max_size=30).map("".join)


@given(texts, st.data())
def test_byte_slice_equals_encoded_code_point_slice(doc, data):
    s = data.draw(st.integers(0, len(doc)))
    e = data.draw(st.integers(s, len(doc)))
    bs, be = utf8_offset(doc, s), utf8_offset(doc, e)
    assert doc.encode("utf-8")[bs:be] == doc[s:e].encode("utf-8")
    assert utf8_offsets(doc, [e, s, e]) == [be, bs, be]  # any order, repeats kept


@given(st.lists(texts, min_size=1, max_size=4), st.data())
def test_many_spans_over_many_documents(docs, data):
    texts_by_id = {f"d{i}": t for i, t in enumerate(docs)}
    rows = []
    for _ in range(data.draw(st.integers(0, 12))):
        d = data.draw(st.sampled_from(sorted(texts_by_id)))
        s = data.draw(st.integers(0, len(texts_by_id[d])))
        rows.append((d, s, data.draw(st.integers(s, len(texts_by_id[d])))))
    starts, ends = utf8_spans(texts_by_id, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
    for (d, s, e), bs, be in zip(rows, starts, ends, strict=True):
        assert texts_by_id[d].encode("utf-8")[bs:be] == texts_by_id[d][s:e].encode("utf-8")


def test_known_values():
    doc = "é🙂東x"  # 2 + 4 + 3 + 1 bytes
    assert [utf8_offset(doc, i) for i in range(5)] == [0, 2, 6, 9, 10]
    assert utf8_offset("ascii", 3) == 3


def test_null_rows_stay_null_as_in_diagnoses():
    texts = {"a": "é🙂"}
    diag = pd.DataFrame({"doc_id": ["a", None, "a"], "char_start": pd.array([0, None, 1], dtype="Int64"),
                         "char_end": pd.array([1, None, 2], dtype="Int64")})
    starts, ends = utf8_spans(texts, diag["doc_id"].tolist(), diag["char_start"].tolist(), diag["char_end"].tolist())
    assert starts == [0, None, 2] and ends == [2, None, 6]
    assert utf8_spans(texts, [float("nan")], [0], [1]) == ([None], [None])


def test_out_of_range_offsets_raise():
    with pytest.raises(IndexError):
        utf8_offset("abc", 4)
    with pytest.raises(IndexError):
        utf8_offsets("é", [-1])
    with pytest.raises(ValueError):
        utf8_spans({"a": "x"}, ["a"], [0], [])
