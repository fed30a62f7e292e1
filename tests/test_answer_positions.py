"""AnswerPositions (tasks/reuse/answer_store.py) gives the positions Series.map with a dict gave."""

from __future__ import annotations

import numpy as np
import pandas as pd
from ragspan.tasks.reuse.answer_store import AnswerPositions, in_answer_order


def _mapped(answers: pd.Series, column: pd.Series) -> np.ndarray:
    return column.map(dict(zip(answers, range(len(answers))))).to_numpy()


def test_positions_are_maps():
    answers = pd.Series(["q3", "q1", "q2"], dtype="str")
    for column in (pd.Series(["q1", "q1", "q3", "q2"], dtype="str"), pd.Series(["q2", "qx", None], dtype="str"),
                   pd.Series([], dtype="str"), pd.Series(["q1", "q3"], dtype=object)):
        got, want = AnswerPositions(answers).of(column), _mapped(answers, column)
        np.testing.assert_array_equal(got, want)
        assert np.argsort(got, kind="stable").tolist() == np.argsort(want, kind="stable").tolist()
    repeated = pd.Series(["q1", "q2", "q1"], dtype="str")  # a repeated id: the last position, as a dict keeps
    np.testing.assert_array_equal(AnswerPositions(repeated).of(pd.Series(["q1", "q2"], dtype="str")), [2, 1])


def test_rows_in_answer_order():
    answers = pd.DataFrame({"question_id": ["b", "a", "c"]})
    table = pd.DataFrame({"question_id": ["a", "c", "b", "a"], "n": [1, 2, 3, 4]})
    ordered = in_answer_order(table, table["question_id"], answers)
    assert ordered["n"].tolist() == [3, 1, 4, 2]
