"""Offsets are the contract: every span written satisfies doc[start:end] == text.

Property tests over Unicode that breaks naive code: combining marks, emoji with ZWJ,
CJK, RTL, CRLF, NBSP, soft hyphens, curly quotes and dashes."""

from __future__ import annotations

import unicodedata

from hypothesis import example, given
from hypothesis import strategies as st
from ragspan.tasks.core.locate import locate_quote
from ragspan.tasks.core.text import normalize, normalize_with_map
from ragspan.tasks.judges.local import split_claims

ATOMS = [
    "a", "Z", "7", " ", "  ", "\r\n", "\n", "\t", ".", ",", "é", "e\u0301", "👩‍👩‍👧", "🙂", "東京", "日本語",
    "שלום", "مرحبا", "\u00a0", "\u00ad", "“", "”", "’", "—", "–", "ﬁ", "Ⅻ", "word", "Refund", "30", "$49",
]
texts = st.lists(st.sampled_from(ATOMS), min_size=1, max_size=40).map("".join)


@given(texts, st.data())
def test_exact_substring_is_found_at_exact_offsets(doc, data):
    i = data.draw(st.integers(0, len(doc) - 1))
    j = data.draw(st.integers(i + 1, len(doc)))
    quote = doc[i:j]
    found = locate_quote(doc, quote, i)
    if quote.strip():
        assert found is not None
        s, e, match = found
        assert doc[s:e] == quote and match == "exact" and (s, e) == (i, j)


@st.composite
def text_and_slice(draw: st.DrawFn) -> tuple[str, int, int]:
    """A text and a non-empty slice [i, j) of it (a tuple, so a find can be an @example)."""
    doc = draw(texts)
    i = draw(st.integers(0, len(doc) - 1))
    return doc, i, draw(st.integers(i + 1, len(doc)))


# Found by the random search: the quote "F" (the f of "Refund") was located on the
# ligature "ﬁ", whose normal form "fi" only starts with it.
@example(("aaaaaa👩\u200d👩\u200d👧שלוםﬁRefund", 18, 19))
@given(text_and_slice())
def test_normalised_match_maps_back_to_a_raw_slice_with_the_same_normal_form(drawn):
    doc, i, j = drawn
    if (j < len(doc) and unicodedata.combining(doc[j])) or unicodedata.combining(doc[i]):
        return  # a quote that cuts a letter from its accent is not a quote of this text
    # What an LLM does to a quote: NFC/NFKC, straight quotes, collapsed whitespace, case.
    mangled = " ".join(unicodedata.normalize("NFKC", doc[i:j]).replace("’", "'").split()).upper()
    found = locate_quote(doc, mangled, None)
    if normalize(mangled):
        assert found is not None
        s, e, _ = found
        assert 0 <= s < e <= len(doc)
        assert normalize(doc[s:e]) == normalize(mangled)


@given(texts)
def test_normalize_map_points_into_the_raw_text(doc):
    norm, starts, ends = normalize_with_map(doc)
    assert len(norm) == len(starts) == len(ends)
    assert starts == sorted(starts) and ends == sorted(ends)
    assert all(0 <= s < e <= len(doc) for s, e in zip(starts, ends))


@given(texts)
def test_decomposed_claims_are_exact_answer_slices(answer):
    for claim in split_claims(answer):
        assert answer[claim.start : claim.end] == claim.text
        assert claim.text == claim.text.strip()


def test_quote_absent_from_passage_is_not_found():
    assert locate_quote("Refunds take 30 days.", "Refunds take 60 days", None) is None
    assert locate_quote("abc", "   ", None) is None


def test_nearest_occurrence_to_the_judges_hint_wins():
    doc = "fee applies. fee applies. fee applies."
    assert locate_quote(doc, "fee applies", 14)[:2] == (13, 24)
