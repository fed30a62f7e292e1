"""pandera models for every table ragspan reads or writes, checked at step boundaries.

Input tables allow extra columns (metadata); pipeline tables are strict so a step
that adds or drops a column by mistake fails at the boundary, not three steps later.
"""

from __future__ import annotations

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series
from ragspan.tasks.core.taxonomy import LABELS

VERDICTS = ("supported", "partial", "unsupported")
JUDGE_KINDS = ("local", "openai")  # who can decide a verdict (a cascade is both)
SOURCES = ("retrieved", "corpus", "reference")  # where a judged passage came from
MATCHES = ("exact", "normalized")  # how a quote was matched to raw offsets


class Corpus(pa.DataFrameModel):
    doc_id: Series[str] = pa.Field(unique=True, str_length={"min_value": 1})
    text: Series[str]

    class Config:
        strict = False  # other columns are metadata


class Chunks(pa.DataFrameModel):
    chunk_id: Series[str] = pa.Field(unique=True, str_length={"min_value": 1})
    doc_id: Series[str]
    char_start: Series[int] = pa.Field(ge=0)
    char_end: Series[int] = pa.Field(ge=0)

    @pa.dataframe_check
    def end_after_start(cls, df: pd.DataFrame) -> Series[bool]:
        return df["char_end"] > df["char_start"]


class Questions(pa.DataFrameModel):
    question_id: Series[str] = pa.Field(unique=True, str_length={"min_value": 1})
    question: Series[str]
    reference_answer: Series[str] | None = pa.Field(nullable=True)

    class Config:
        strict = False


class Answers(pa.DataFrameModel):
    run: Series[str]
    question_id: Series[str] = pa.Field(unique=True)
    question: Series[str]  # what the answer answers: the judges read claims in its light
    answer: Series[str]
    claims: Series[object] = pa.Field(nullable=True)  # list[str] (bring-your-own) or None

    class Config:
        strict = True
        coerce = True


class Retrieved(pa.DataFrameModel):
    run: Series[str]
    question_id: Series[str]
    rank: Series[int] = pa.Field(ge=1)
    chunk_id: Series[str]
    doc_id: Series[str]
    char_start: Series[int] = pa.Field(ge=0)
    char_end: Series[int] = pa.Field(ge=0)
    score: Series[float] = pa.Field(nullable=True)
    in_context: Series[bool]

    class Config:
        strict = True
        coerce = True


class Claims(pa.DataFrameModel):
    run: Series[str]
    question_id: Series[str]
    claim_id: Series[str] = pa.Field(unique=True)
    claim_index: Series[int] = pa.Field(ge=0)
    claim: Series[str]
    question: Series[str]  # the question the claim's answer answers (judged with it)
    answer_start: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    answer_end: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    origin: Series[str] = pa.Field(isin=["decomposed", "provided"])
    decompose_error: Series[str] = pa.Field(nullable=True)  # set when the judge could not split

    class Config:
        strict = True
        coerce = True


class Passages(pa.DataFrameModel):
    """What the judge reads: one (claim's question or claim, passage) pair per row."""

    question_id: Series[str]
    claim_id: Series[str] = pa.Field(nullable=True)  # set for corpus-search hits (per claim)
    source: Series[str] = pa.Field(isin=list(SOURCES))
    chunk_id: Series[str] = pa.Field(nullable=True)
    doc_id: Series[str] = pa.Field(nullable=True)
    passage_start: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    rank: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=1)
    in_context: Series[bool]
    score: Series[float] = pa.Field(nullable=True)
    passage_text: Series[str]

    class Config:
        strict = True
        coerce = True


class Candidates(pa.DataFrameModel):
    """One judge verdict on one (claim, passage) pair, before offsets are validated.

    `quote` is what the judge quoted; `quote_start`/`quote_end` are its own claim of
    where the quote sits in the passage (may be wrong or missing: validate_offsets decides).
    `error` is set (and verdict null) when the judge failed on this pair.
    """

    claim_id: Series[str]
    source: Series[str] = pa.Field(isin=list(SOURCES))
    chunk_id: Series[str] = pa.Field(nullable=True)
    doc_id: Series[str] = pa.Field(nullable=True)
    passage_start: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    rank: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=1)
    in_context: Series[bool]
    score: Series[float] = pa.Field(nullable=True)
    verdict: Series[str] = pa.Field(nullable=True, isin=list(VERDICTS))
    confidence: Series[float] = pa.Field(nullable=True, ge=0, le=1)
    support: Series[float] = pa.Field(nullable=True, ge=0, le=1)  # P(this passage supports the claim)
    quote: Series[str] = pa.Field(nullable=True)
    quote_start: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    passage_text: Series[str] = pa.Field(nullable=True)  # only where there is a quote to place
    reason: Series[str] = pa.Field(nullable=True)
    error: Series[str] = pa.Field(nullable=True)
    decided_by: Series[str] = pa.Field(nullable=True, isin=list(JUDGE_KINDS))  # which judge gave it
    # What of the claim this passage leaves unsupported or contradicts: JSON
    # [[start, end, kind, evidence_start, evidence_end], ...] in claim coordinates, the
    # evidence in the passage's (tasks/core/answer_spans.py); null when there is none.
    marks: Series[str] = pa.Field(nullable=True)

    class Config:
        strict = True
        coerce = True


class Judgements(pa.DataFrameModel):
    """Candidates after validate_offsets: quotes resolved to raw document offsets.

    `match` is `exact`/`normalized` when the quote was found (then
    `corpus[doc_id].text[char_start:char_end] == span_text`), null otherwise; a quote
    that cannot be found turns the row into an `invalid_quote` error."""

    claim_id: Series[str]
    source: Series[str] = pa.Field(isin=list(SOURCES))
    chunk_id: Series[str] = pa.Field(nullable=True)
    doc_id: Series[str] = pa.Field(nullable=True)
    rank: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=1)
    in_context: Series[bool]
    score: Series[float] = pa.Field(nullable=True)
    verdict: Series[str] = pa.Field(nullable=True, isin=list(VERDICTS))
    confidence: Series[float] = pa.Field(nullable=True, ge=0, le=1)
    support: Series[float] = pa.Field(nullable=True, ge=0, le=1)
    char_start: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    char_end: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    span_text: Series[str] = pa.Field(nullable=True)
    match: Series[str] = pa.Field(nullable=True, isin=list(MATCHES))
    reason: Series[str] = pa.Field(nullable=True)
    error: Series[str] = pa.Field(nullable=True)
    decided_by: Series[str] = pa.Field(nullable=True, isin=list(JUDGE_KINDS))
    marks: Series[str] = pa.Field(nullable=True)  # as in Candidates, the evidence in document coordinates

    class Config:
        strict = True
        coerce = True


class Spans(pa.DataFrameModel):
    """Validated evidence: `corpus[doc_id].text[char_start:char_end] == span_text` always."""

    claim_id: Series[str]
    source: Series[str] = pa.Field(isin=["retrieved", "corpus"])
    chunk_id: Series[str]
    doc_id: Series[str]
    char_start: Series[int] = pa.Field(ge=0)
    char_end: Series[int] = pa.Field(ge=0)
    span_text: Series[str]
    match: Series[str] = pa.Field(isin=list(MATCHES))
    rank: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=1)
    in_context: Series[bool]
    score: Series[float] = pa.Field(nullable=True)
    verdict: Series[str] = pa.Field(isin=list(VERDICTS))
    confidence: Series[float] = pa.Field(ge=0, le=1)
    reason: Series[str] = pa.Field(nullable=True)
    # UTF-8 byte offsets of the same span, for consumers in other languages (written files only)
    byte_start: Series[pd.Int64Dtype] | None = pa.Field(ge=0)
    byte_end: Series[pd.Int64Dtype] | None = pa.Field(ge=0)

    class Config:
        strict = True
        coerce = True

    @pa.dataframe_check
    def end_after_start(cls, df: pd.DataFrame) -> Series[bool]:
        return df["char_end"] > df["char_start"]


class Diagnoses(pa.DataFrameModel):
    run: Series[str]
    question_id: Series[str]
    claim_id: Series[str] = pa.Field(unique=True)
    claim: Series[str]
    answer_start: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    answer_end: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    label: Series[str] = pa.Field(isin=list(LABELS))
    doc_id: Series[str] = pa.Field(nullable=True)
    chunk_id: Series[str] = pa.Field(nullable=True)
    char_start: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    char_end: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    span_text: Series[str] = pa.Field(nullable=True)
    rank: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=1)
    in_context: Series[pd.BooleanDtype] = pa.Field(nullable=True)
    score: Series[float] = pa.Field(nullable=True)
    reason: Series[str]
    source_conflict: Series[bool]
    evidence_source: Series[str] = pa.Field(nullable=True)  # retrieved | corpus
    match: Series[str] = pa.Field(nullable=True, isin=list(MATCHES))
    confidence: Series[float] = pa.Field(nullable=True, ge=0, le=1)
    # The claim's probability of being supported: the highest of its passages'. `uncertain`
    # when the label rests on a probability within judge.uncertainty_band of the threshold.
    support_probability: Series[float] = pa.Field(nullable=True, ge=0, le=1)
    uncertain: Series[bool]
    # The judge whose verdicts decided the label (a cascade: local or openai).
    decided_by: Series[str] = pa.Field(nullable=True, isin=list(JUDGE_KINDS))
    # Characters of the claim (in the answer) that no judged evidence supports or that it
    # contradicts — the answer spans' total — and their share of the claim's characters;
    # null for unjudged claims and claims not located in their answer. (Optional: results
    # written before answer spans existed lack them.)
    unsupported_chars: Series[pd.Int64Dtype] | None = pa.Field(nullable=True, ge=0)
    unsupported_share: Series[float] | None = pa.Field(nullable=True, ge=0, le=1)
    # The deciding evidence crosses a chunk boundary and no single chunk holds it whole
    # (tasks/core/chunk_split.py); `split_at` is the document offset of that boundary, null
    # otherwise. (Optional: results written before issue 30 lack them.)
    chunk_split: Series[bool] | None
    split_at: Series[pd.Int64Dtype] | None = pa.Field(nullable=True, ge=0)
    byte_start: Series[pd.Int64Dtype] | None = pa.Field(nullable=True, ge=0)
    byte_end: Series[pd.Int64Dtype] | None = pa.Field(nullable=True, ge=0)

    class Config:
        strict = True
        coerce = True

    @pa.dataframe_check
    def split_inside_evidence(cls, df: pd.DataFrame) -> Series[bool]:
        """A boundary is named only inside the evidence it cuts."""
        if "split_at" not in df.columns:
            return pd.Series(True, index=df.index)
        at = df["split_at"]
        return at.isna() | ((df["char_start"] < at) & (at < df["char_end"])).fillna(False)


ANSWER_SPAN_KINDS = ("unsupported", "contradicted")


class AnswerSpans(pa.DataFrameModel):
    """The characters of an answer its evidence does not support, for every claim that is
    not `correct` (a `correct` claim, uncertain or not, has none: its doubt is the
    diagnosis' `uncertain` flag, never an `unsupported` span): `answer[answer_start:answer_end] == text`
    always (code points; answer_byte_* are the UTF-8 byte offsets). A `contradicted` span
    names the evidence that says otherwise: `corpus[doc_id].text[char_start:char_end] ==
    evidence_text`."""

    run: Series[str]
    question_id: Series[str]
    claim_id: Series[str]
    answer_start: Series[int] = pa.Field(ge=0)
    answer_end: Series[int] = pa.Field(ge=0)
    text: Series[str] = pa.Field(str_length={"min_value": 1})
    kind: Series[str] = pa.Field(isin=list(ANSWER_SPAN_KINDS))
    doc_id: Series[str] = pa.Field(nullable=True)
    char_start: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    char_end: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    evidence_text: Series[str] = pa.Field(nullable=True)
    answer_byte_start: Series[pd.Int64Dtype] | None = pa.Field(ge=0)
    answer_byte_end: Series[pd.Int64Dtype] | None = pa.Field(ge=0)
    byte_start: Series[pd.Int64Dtype] | None = pa.Field(nullable=True, ge=0)
    byte_end: Series[pd.Int64Dtype] | None = pa.Field(nullable=True, ge=0)

    class Config:
        strict = True
        coerce = True

    @pa.dataframe_check
    def end_after_start(cls, df: pd.DataFrame) -> Series[bool]:
        return df["answer_end"] > df["answer_start"]


def records(frame: pd.DataFrame, missing_as_none: bool = False) -> list[dict]:
    """`frame.to_dict("records")`, column-wise: each column converted once in C
    (`tolist`), not element by element — pandas 3 keeps strings in Arrow arrays, and
    to_dict iterating them cost seconds per 40k-row table in the report.
    `missing_as_none`: every missing value (NaN, pd.NA, None) becomes None."""
    columns = list(frame.columns)
    return [dict(zip(columns, row)) for row in zip(*(_as_list(frame[c], missing_as_none) for c in columns))]


def _as_list(column: pd.Series, missing_as_none: bool) -> list:
    values = column.tolist()
    if missing_as_none:
        missing = column.isna().to_numpy()
        return [None if m else v for v, m in zip(values, missing)] if missing.any() else values
    if isinstance(column.dtype, (pd.Int64Dtype, pd.BooleanDtype)):  # to_dict gives None for pd.NA
        return [None if v is pd.NA else v for v in values]
    return values


# Columns added only when the outputs are written (UTF-8 byte offsets): optional in the
# models, absent from the tables the steps pass on.
WRITE_ONLY = ("byte_start", "byte_end", "answer_byte_start", "answer_byte_end")


def table(rows: list[dict], model: type[pa.DataFrameModel], written: bool = True) -> pd.DataFrame:
    """Rows → a DataFrame with exactly `model`'s columns, coerced and validated;
    `written=False`: without the WRITE_ONLY columns (a table between steps)."""
    columns = [c for c in model.to_schema().columns if written or c not in WRITE_ONLY]
    return model.validate(pd.DataFrame(rows, columns=columns))
