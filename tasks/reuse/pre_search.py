"""Pre-search state in the answer store: an answer's claims and the verdicts on its
retrieved passages, kept so that a re-run after a corpus change starts the answer's chain
at corpus-wide search (docs/decisions.md #58).

decompose and extract-on-retrieved read the answer, its passages (their texts and where
they start in their documents) and the context alone — not the rest of the corpus — so
their results hold while the answer's key by passages (answer_store.AnswerKey.passages:
answer, passages, context) does. An answer is stored whole under its key by documents, or
by corpus when one of its claims searched the corpus (any corpus change moves that one);
its pre-search state is stored besides, under its key by passages. After 5 % of the
documents changed (a sentence appended to each, say), the answers not reused whole whose
retrieved chunks are unchanged — whether or not they cite a changed document — skip
decompose and extract on retrieved passages and redo only corpus search → … → chunk split;
their results are a cold run's.

Files, in each answer-store segment (sealed with it): `pre_search/piece-NNNNN.pickle`, one
per shard of the run that wrote it — {"claims", "judged"}, each row tagged with its answer's
key (pickle: the exact frames the steps made, dtypes and NA kinds, as the shard spill keeps
them) — and `pre_search/index.parquet` (answer key → piece). A run reads every segment's
index (`located`: one row per answer); the pieces are read one shard at a time, as the
shard is made (`read_pre_search`): memory is set by the shards in flight. Folding the
segments links the pieces still referred to into the folded one (`carry_over`)."""

from __future__ import annotations

import os
import pickle
import shutil
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd
from ragspan.tasks.core.shards import PreSearch

DIRECTORY = "pre_search"  # inside a segment
INDEX = "index.parquet"
KEY = "answer_key"  # as answer_store.KEY
PIECE = "piece"


def write_pieces(directory: Path, pieces: Iterable[PreSearch]) -> None:
    """Every non-empty piece (rows tagged with KEY) as a pickle, and the index of their keys."""
    directory.mkdir(parents=True, exist_ok=True)
    index: list[pd.DataFrame] = []
    for i, piece in enumerate(p for p in pieces if len(p.claims)):
        name = f"piece-{i:05d}.pickle"
        with open(directory / name, "wb") as f:
            pickle.dump({"claims": piece.claims, "judged": piece.judged}, f, protocol=pickle.HIGHEST_PROTOCOL)
        index.append(pd.DataFrame({KEY: piece.claims[KEY].unique(), PIECE: name}))
    _write_index(directory, index)


def _write_index(directory: Path, index: list[pd.DataFrame]) -> None:
    table = pd.concat(index, ignore_index=True) if index else pd.DataFrame({KEY: [], PIECE: []}, dtype=str)
    table.to_parquet(directory / INDEX, index=False)


def located(segments: Sequence[Path]) -> dict[str, str]:
    """Answer key → the piece file holding its pre-search state, of the newest segment that
    has one (`segments`: oldest first)."""
    where: dict[str, str] = {}
    for seg in segments:
        index = seg / DIRECTORY / INDEX
        if index.is_file():
            table = pd.read_parquet(index)
            base = str(seg / DIRECTORY) + os.sep
            where.update(zip(table[KEY].tolist(), (base + n for n in table[PIECE].tolist())))
    return where


def read_pre_search(files: Mapping[str, str]) -> PreSearch | None:
    """The pre-search state of the answer keys in `files` (key → its piece file), without
    the KEY column; None when no piece could be read (folded away meanwhile: those answers
    are decomposed again)."""
    keys_in: dict[str, set[str]] = defaultdict(set)
    for key, file in files.items():
        keys_in[file].add(key)
    claims, judged = [], []
    for file, keys in keys_in.items():
        try:
            with open(file, "rb") as f:
                piece = pickle.load(f)
        except FileNotFoundError:
            continue
        claims.append(piece["claims"][piece["claims"][KEY].isin(keys)])
        judged.append(piece["judged"][piece["judged"][KEY].isin(keys)])
    if not claims:
        return None
    return PreSearch(*(pd.concat(t, ignore_index=True).drop(columns=[KEY]) for t in (claims, judged)))


def carry_over(segments: Sequence[Path], directory: Path) -> None:
    """The pieces of `segments` (oldest first) that their indexes' newest rows refer to,
    linked into `directory` (a folded segment's) with one index for them all."""
    directory.mkdir(parents=True, exist_ok=True)
    newest = located(segments)
    names: dict[str, str] = {}  # old piece file → its name in `directory`
    for file in sorted(set(newest.values())):
        names[file] = f"piece-{len(names):05d}.pickle"
        _link(Path(file), directory / names[file])
    _write_index(directory, [pd.DataFrame({KEY: list(newest), PIECE: [names[f] for f in newest.values()]})])


def _link(source: Path, target: Path) -> None:
    """`target` as a hard link to `source` (no copy of the bytes), or a copy where links fail."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
