"""benchmarks/ragtruth: the metrics and the two baselines on hand-built answers (no ../shared)."""

from __future__ import annotations

import pytest

from benchmarks.ragtruth import data as D
from benchmarks.ragtruth import metrics as M
from benchmarks.ragtruth.run import score_group


def test_balanced_accuracy_and_answer_f1():
    gold = [True, False, True, False]
    assert M.balanced_accuracy([True, True, False, False], gold) == 0.5
    assert M.balanced_accuracy([True, False, False, False], gold) == 0.75  # (1/2 + 2/2) / 2
    assert M.balanced_accuracy([True, True], [True, True]) is None  # one class only
    r = M.answer_scores([True, True, False, False], gold)
    assert (r["precision"], r["recall"], r["f1"], r["clean_flagged"]) == (0.5, 0.5, 0.5, 0.5)
    assert M.answer_scores([False] * 4, gold)["f1"] is None  # nothing flagged: no precision


def test_char_counts_skip_whitespace_and_sum_over_answers():
    c = M.CharCounts()
    # "Paris is big": flagged "Paris"; marked "Paris" and " is " (its spaces do not count)
    c.add("Paris is big", [(0, 5)], [(0, 5), (5, 9)])
    assert (c.tp, c.fp, c.fn, c.total) == (5, 0, 2, 10)
    c.add("It  rains", [(4, 9)], [])  # a second answer: 5 flagged, none marked
    s = c.scores()
    assert (c.tp, c.fp, c.fn, c.total) == (5, 5, 2, 17)
    assert s["precision"] == 0.5
    assert s["recall"] == pytest.approx(5 / 7)
    assert s["f1"] == pytest.approx(2 * 0.5 * (5 / 7) / (0.5 + 5 / 7))
    assert M.any_char("a  b", [(1, 3)]) is False  # a span of spaces flags nothing
    assert M.any_char("a  b", [(1, 4)]) is True


def test_lexical_baseline_flags_absent_content_words():
    passages = ["The tower is 330 metres tall."]
    answer = "The Tower is 330 metres tall and painted red."
    got = [answer[s:e] for s, e in M.lexical_spans(answer, passages)]
    assert got == ["painted", "red"]  # "Tower": case-folded; "and": a stopword


def test_one_line_rule_flags_absent_numbers_and_names():
    passages = ["The tower, 330 metres tall, was designed by Eiffel's company."]
    answer = "Built in 1889, the tower was designed by Gustave Eiffel. It is 330 metres high."
    got = [answer[s:e] for s, e in M.rule_spans(answer, passages)]
    # "Built" and "It" start sentences; "Eiffel" and "330" are in the passage; "high" is no name
    assert got == ["1889", "Gustave"]


def test_passages_split_and_half_is_deterministic():
    assert D.split_passages("passage 1:A b\n\npassage 2:C\n\npassage 3:\n\n") == ["A b", "C"]
    halves = [D.half(i) for i in range(200)]
    assert halves == [D.half(i) for i in range(200)]
    assert 60 < halves.count("tune") < 140


def _answer(qid: str, text: str, labels: list[tuple[int, int, str]]) -> D.Answer:
    return D.Answer("qa_dev", qid, 1, "m", "q?", ["p"], text,
                    [{"start": s, "end": e, "label_type": t} for s, e, t in labels])


def test_score_group_answer_char_and_conflict_figures():
    answers = [
        _answer("a", "It costs 5 dollars.", [(9, 18, "Evident Conflict")]),  # "5 dollars"
        _answer("b", "It is red.", []),
        _answer("c", "It is blue.", []),
    ]
    pred = {  # (flagged, contradicted)
        "a": ([(9, 10)], [(9, 10)]),  # "5": right, and a conflict
        "b": ([(6, 9)], []),  # "red": a false alarm
        "c": ([], []),
    }
    r = score_group(answers, pred, None)
    assert r["answer"]["balanced_accuracy"] == 0.75  # (1/1 + 1/2) / 2
    assert r["answer"]["clean_flagged"] == 0.5
    assert (r["char"]["tp"], r["char"]["fp"], r["char"]["fn"]) == (1, 3, 7)
    assert r["char"]["precision"] == 0.25
    assert r["conflict"]["precision"] == 1.0
    assert r["conflict"]["recall"] == 1 / 8
