"""Questions: question_id, question, optional reference_answer and metadata."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from ragspan.tasks.core.schemas import Questions
from ragspan.tasks.errors import InputError
from ragspan.tasks.inputs.load.corpus import _metadata, _relpath
from ragspan.tasks.inputs.load.files import _read_with_hash, find_table
from ragspan.tasks.inputs.load.problems import (
    _Problems,
    _require_columns,
    _strings,
    _strip_index,
    _unique,
    _validate_schema,
)

# --------------------------------------------------------------------------- questions


def load_questions(data_dir: Path) -> pd.DataFrame:
    """questions.*: question_id, question, reference_answer (always present; missing -> NA)."""
    return _load_questions(Path(data_dir))[0]


def _load_questions(data_dir: Path) -> tuple[pd.DataFrame, dict[str, str]]:
    path = find_table(data_dir, "questions", required=True)
    assert path is not None
    df, digest = _read_with_hash(path)
    _require_columns(path, df, ("question_id", "question"))
    if not len(df):
        raise InputError(path, None, None, "no questions")
    df, rows = _strip_index(df)
    probs = _Problems(path, rows, ("question_id", df["question_id"].tolist()))
    qids = _strings(df["question_id"].tolist(), "question_id", probs)
    # An empty question is allowed: answers that answer no question (summaries, reports)
    # are judged on the claim alone. A missing value (null) is still an error.
    qs = _strings(df["question"].tolist(), "question", probs, blank_ok=True)
    refs = (
        _strings(df["reference_answer"].tolist(), "reference_answer", probs, optional=True)
        if "reference_answer" in df.columns
        else [None] * len(df)
    )
    _unique(qids, "question_id", probs, rows)
    probs.raise_first()
    meta_cols = [c for c in df.columns if c not in ("question_id", "question", "reference_answer")]
    out = pd.DataFrame(
        {
            "question_id": pd.Series(qids, dtype="str"),
            "question": pd.Series(qs, dtype="str"),
            "reference_answer": pd.Series(refs, dtype="str"),
            **_metadata(df, meta_cols, path.suffix.lower() == ".csv"),
        }
    )
    out = _validate_schema(Questions, out, path, rows)
    return out, {_relpath(path, data_dir): digest}
