"""`among` (tasks/core/among.py) gives pandas' own `isin` booleans, faster."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from ragspan.tasks.core.among import among

COLUMN = pd.Series(["a", "b", None, "c", "a", "é", ""], index=[7, 3, 5, 1, 0, 2, 9], name="id", dtype="str")


@pytest.mark.parametrize("values", [
    {"a", "c"}, ["b", "zz"], ("é", ""), frozenset(), [], {"a": 1}.keys(), {"a": 1, "c": 2},
    pd.Series(["c", None]), pd.Index(["a"]), np.array(["b", "c"], dtype=object), [None], [np.nan],
    ["a", 3], [1, 2], iter(["a", "b"]),
], ids=repr)
def test_among_equals_isin(values):
    again = list(values) if not isinstance(values, (dict, pd.Series, pd.Index, np.ndarray, set, frozenset)) else values
    expected = COLUMN.isin(again)
    got = among(COLUMN, again)
    pd.testing.assert_series_equal(got, expected)


def test_other_columns_are_pandas_own():
    numbers = pd.Series([1, 2, 3])
    pd.testing.assert_series_equal(among(numbers, {2}), numbers.isin({2}))
    objects = pd.Series(["a", "b"], dtype=object)
    pd.testing.assert_series_equal(among(objects, {"b"}), objects.isin({"b"}))


def test_many_ids():
    ids = pd.Series([f"chunk-{i}" for i in range(20000)], dtype="str")
    wanted = {f"chunk-{i}" for i in range(0, 30000, 7)}
    assert among(ids, wanted).to_numpy().tolist() == ids.isin(wanted).to_numpy().tolist()
    assert among(ids, wanted).sum() == len(range(0, 20000, 7))
