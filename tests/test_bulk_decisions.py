"""Pairs whose verdict needs no model are decided in bulk: the same rows as judging them.

`Verifier.fixed_rows` names the pairs whose row is fixed without the model (a claim with no
content word, a passage below the short-circuit bound). The judge leaves them out of what
it judges and stores; this holds only if (1) their rows are exactly what `rows` gives them
and (2) judging the other pairs without them gives those pairs the same rows, marks
included. Shown on every claim × retrieved passage of the bundled sample."""

from __future__ import annotations

from conftest import SAMPLE
from ragspan.tasks.core.shards import passages_for
from ragspan.tasks.io.load import load_workspace
from ragspan.tasks.judges.local import split_claims
from ragspan.tasks.judges.verifier import verifier


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
