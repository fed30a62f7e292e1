"""Pairs whose verdict needs no model are decided in bulk: the same rows as judging them.

`Verifier.fixed_rows` names the pairs whose row is fixed without the model (a claim with no
content word, a passage below the short-circuit bound). The judge leaves them out of what
it judges and stores; this holds only if (1) their rows are exactly what `rows` gives them
and (2) judging the other pairs without them gives those pairs the same rows, marks
included. Shown on every claim × retrieved passage of the bundled sample."""

from __future__ import annotations

from conftest import SAMPLE
from hypothesis import given
from hypothesis import strategies as st
from ragspan.tasks.core.shards import passages_for
from ragspan.tasks.inputs.load import load_workspace
from ragspan.tasks.judges.local import split_claims
from ragspan.tasks.judges.verifier import verifier
from ragspan.tasks.judges.verifier.bulk import BulkBound
from ragspan.tasks.judges.verifier.features import unsupported_bound
from ragspan.tasks.judges.verifier.profiles import claim_content, claim_profile


def _sample_items() -> list[tuple[str, list[str], str, bool]]:
    ws = load_workspace(SAMPLE, "baseline", 400, 50, 3)
    passages = passages_for(ws)
    retrieved = passages[passages["source"] == "retrieved"]
    texts = retrieved.groupby("question_id")["passage_text"].agg(list).to_dict()
    questions = dict(zip(ws.questions["question_id"], ws.questions["question"]))
    items = []
    for q, answer in zip(ws.answers["question_id"], ws.answers["answer"]):
        claims = split_claims(answer)
        for c in claims:
            items.append((c.text, texts.get(q, []), questions.get(q, ""), len(claims) == 1))
    return items


def test_fixed_rows_are_the_rows_the_model_path_gives():
    v = verifier()
    items = _sample_items()
    full = v.rows(items)
    fixed = v.fixed_rows(items)
    n_fixed = sum(r is not None for rows in fixed for r in rows)
    n_pairs = sum(len(rows) for rows in fixed)
    assert 0 < n_fixed < n_pairs  # the sample has both kinds
    for got, want in zip(fixed, full, strict=True):
        for g, w in zip(got, want, strict=True):
            if g is not None:
                assert g == w


def test_judging_without_the_fixed_pairs_changes_no_other_row():
    v = verifier()
    items = _sample_items()
    full = v.rows(items)
    fixed = v.fixed_rows(items)
    reduced = [(c, [p for p, f in zip(ps, fx) if f is None], q, w) for (c, ps, q, w), fx in zip(items, fixed)]
    rows = v.rows(reduced)
    marked = 0
    for want, fx, got in zip(full, fixed, rows, strict=True):
        rest = iter(got)
        for w, f in zip(want, fx, strict=True):
            assert (f if f is not None else next(rest)) == w
            marked += bool(w[-1])
    assert marked > 0  # marks are part of what is compared


# ------------------------------------------------------------ the bound in bulk (verifier/bulk.py)
def _pairwise(items: list[tuple[str, list[str], str, bool]], bound: float) -> list[list[bool] | None]:
    """The bound pair by pair, as `Verifier.rows` decides it."""
    out: list[list[bool] | None] = []
    for claim, passages, question, whole_answer in items:
        profile = claim_profile(claim, question or "", whole_answer)
        out.append(None if profile is None else [unsupported_bound(profile, p) < bound for p in passages])
    return out


def _bulk(items: list[tuple[str, list[str], str, bool]], bound: float, **limits: int) -> list[list[bool] | None]:
    got = BulkBound(**limits).below(items, bound)
    return [None if g is None else g.tolist() for g in got]


def test_the_bulk_bound_is_the_pairwise_bound_on_the_sample():
    items = _sample_items()
    bound = verifier().model.bound
    want = _pairwise(items, bound)
    assert _bulk(items, bound) == want
    # every cache cleared over and over, passes of a few pairs: the same
    assert _bulk(items, bound, max_norms=50, max_passages=3, max_claims=2) == want
    for b in (0.0, 0.25, 1 / 3, 0.5, 2 / 3, 1.0, 1.5):  # shares equal to the bound are not below it
        assert _bulk(items, b) == _pairwise(items, b)


def test_claim_content_is_the_profiles_content():
    for claim, _ps, question, whole_answer in _sample_items() + _EDGE_ITEMS:
        profile = claim_profile(claim, question, whole_answer)
        assert claim_content(claim, question, whole_answer) == (frozenset() if profile is None else profile.content)


_EDGE_ITEMS = [
    ("Yes.", ["The bridge opened in 1932.", "Paris is in France."], "Did the bridge open in 1932?", True),
    ("No, never.", ["The bridge did not open."], "Did the bridge open?", True),
    ("Yes.", ["anything"], "Is it?", True),  # a polar answer to a question without content words
    ("Delhi.", ["The capital of India is Delhi.", ""], "What is the capital of India?", True),
    ("Delhi.", ["The capital of India is Delhi."], "What is the capital of India?", False),
    ("Thanks!", ["Thanks a lot."], "", False),  # no content word
    ("...", ["..."], "", False),  # no word at all
    ("It costs $5,000.50 in U.S. dollars.", ["U.S. dollars: 5,000.50", "costs"], "", False),
    ("Zürich's e-mail rose 30% by 2004.", ["Zurich e-mail rose 30 %", "2004's", "zürich's"], "", False),
    ("The claim.", [], "", False),  # no passages
    ("Alpha beta gamma.", ["alpha", "alpha", "Alpha beta.", "gamma beta alpha"], "", False),
]


def test_the_bulk_bound_on_edge_cases():
    for bound in (0.0, 0.5, verifier().model.bound, 1.0):
        assert _bulk(_EDGE_ITEMS, bound) == _pairwise(_EDGE_ITEMS, bound)
        assert _bulk(_EDGE_ITEMS, bound, max_norms=1, max_passages=1, max_claims=1) == _pairwise(_EDGE_ITEMS, bound)


_WORDS = st.sampled_from(["the", "bridge", "Bridge", "opened", "open", "in", "1932", "1,932", "U.S.", "not", "no",
                          "Paris", "paris's", "e-mail", "rose", "30%", "Zürich", "yes", "Delhi", "capital", "of",
                          "—", ";", ",", ".", "'", "and", "running", "runs", "x.y", "Ünïcode", "ß", "İstanbul"])
_TEXT = st.lists(_WORDS, max_size=12).map(" ".join)


@given(st.lists(st.tuples(_TEXT, st.lists(_TEXT, max_size=4), _TEXT, st.booleans()), max_size=6),
       st.sampled_from([0.0, 0.2, 0.5, 0.55, 1.0]))
def test_the_bulk_bound_on_random_items(items, bound):
    assert _bulk(items, bound, max_norms=8, max_passages=2, max_claims=2) == _pairwise(items, bound)
    assert _bulk(items, bound) == _pairwise(items, bound)
