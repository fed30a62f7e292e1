"""The validated workspace, the validated-inputs cache, and the Prefect `load` task."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE
from ragspan.tasks.config import Settings, loader_version, state_dir
from ragspan.tasks.errors import InputError
from ragspan.tasks.io.digests import file_md5s
from ragspan.tasks.io.inputs_cache import cached_entry, keep_entry
from ragspan.tasks.io.load.chunks import _load_chunks
from ragspan.tasks.io.load.corpus import load_corpus
from ragspan.tasks.io.load.files import TABLE_SUFFIXES
from ragspan.tasks.io.load.questions import _load_questions
from ragspan.tasks.io.load.runs import _RETRIEVED_COLS, _empty_answers, _load_run, _retrieved_frame


@dataclass(frozen=True, eq=False)  # eq=False: comparing DataFrames with == is ambiguous
class Workspace:
    data_dir: Path
    run: str | None
    corpus: pd.DataFrame  # Corpus: doc_id, text, metadata columns
    chunks: pd.DataFrame  # Chunks: chunk_id, doc_id, char_start, char_end (+ run's ad-hoc chunks)
    questions: pd.DataFrame  # Questions: question_id, question, reference_answer, metadata
    answers: pd.DataFrame  # Answers (empty, typed, when run is None)
    retrieved: pd.DataFrame  # Retrieved (same)
    input_files: dict[str, str]  # path relative to data_dir (posix) -> md5 of the bytes
    # The validated-inputs key (below): every input file's md5, the run, the loader's
    # arguments and code. What follows from these inputs alone may be kept under it
    # (`kept_with_inputs`: the corpus index's name). "" when not known.
    inputs_key: str = ""



# --------------------------------------------------------------------------- workspace


# Validated inputs are kept under <state>/inputs/ at two levels: the corpus, chunks and
# questions ("base-*", keyed by the files they can be read from) and the
# whole workspace of one run ("ws-*", keyed by the base and the run file), each also by
# the loader's arguments and the code version. A key hashes the files' relative paths and
# bytes (md5: ~0.1 s for a 50 MB corpus), so a copy of the data elsewhere (a CI clone, a
# DVC checkout) hits too, and any edit misses. Parsing and validating 100k chunks and 10k
# answers takes ~2.3 s, reading a workspace back ~0.1 s — so the flow's load task does not
# redo what the CLI just did, a re-run on unchanged files starts at once, and a changed
# run file re-reads only itself. Only valid inputs are kept; the INPUT_CACHE_KEEP most
# recent of each level (tasks/io/inputs_cache.py). The store is the store layer's `inputs`
# (tasks/io/store.py): each entry a sealed file, written aside and renamed, healed when it
# cannot be read.


def _content_digest(h: Any, data_dir: Path, paths: list[Path]) -> str:
    for path, md5 in zip(paths, file_md5s(paths)):  # files that did not move are not re-read
        h.update(path.relative_to(data_dir).as_posix().encode() + b"\x00")
        h.update(bytes.fromhex(md5))
    return h.hexdigest()[:32]


def _input_keys(data_dir: Path, run: str | None, base_args: tuple, run_args: tuple) -> tuple[str, str]:

    # What the loader can read: the three tables in any form, and a corpus/ folder.
    tables = [data_dir / f"{stem}{suffix}" for stem in ("corpus", "chunks", "questions") for suffix in TABLE_SUFFIXES]
    folder = sorted(p for p in (data_dir / "corpus").rglob("*") if p.is_file()) if (data_dir / "corpus").is_dir() else []
    base = _content_digest(hashlib.sha256(repr((base_args, loader_version())).encode()), data_dir,
                           [p for p in tables if p.is_file()] + folder)
    run_file = data_dir / "runs" / f"{run}.jsonl"
    whole = _content_digest(hashlib.sha256(repr((base, run, run_args)).encode()), data_dir,
                            [run_file] if run and run_file.is_file() else [])
    return base, whole


STORE = "validated-inputs cache entry"  # as the warning names it
_cached, _keep = cached_entry, keep_entry


# How the last load_workspace of this process got its inputs (`ragspan evaluate --verbose`).
LAST_LOAD: dict[str, str] = {}
# The workspace a caller validated before the flow (`prepare_run`, hand_over=True), by its
# key, handed over once: the flow's `load` task in the same process gets that object rather
# than unpickling the entry again (~0.5 s at 100k chunks × 10k answers). The key is
# computed anew from the files (md5 by stat fingerprint), so a file changed in between is
# a different key: read and validated as before. Taken once, or dropped when the run ends
# (`drop_handover`): a long-lived process (`ragspan serve`) holds no workspace between runs.
_HANDOVER: dict[str, Workspace] = {}


def load_workspace(
    data_dir: str | Path,
    run: str | None,
    chunk_size: int,
    chunk_overlap: int,
    default_context_k: int,
    hand_over: bool = False,
) -> Workspace:
    """Load and validate everything one evaluation needs; the first problem raises InputError.
    Unchanged files are served from the validated-inputs cache (above).
    `hand_over`: the flow's `load` in this process takes this very workspace (_HANDOVER)."""

    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise InputError(data_dir, None, None, "data directory not found")
    root = state_dir() / "inputs"
    base_key, ws_key = _input_keys(data_dir, run, (chunk_size, chunk_overlap), (default_context_k,))
    handed = _HANDOVER.pop(ws_key, None)
    if handed is not None:
        LAST_LOAD["source"] = "validated-inputs cache: hit (loaded earlier in this process)"
        return dataclasses.replace(handed, data_dir=data_dir)
    ws = _cached(root / f"ws-{ws_key}.pickle")
    if isinstance(ws, Workspace):
        LAST_LOAD["source"] = "validated-inputs cache: hit"
        ws = dataclasses.replace(ws, data_dir=data_dir, inputs_key=ws_key)
        return _handing_over(ws) if hand_over else ws
    base = _cached(root / f"base-{base_key}.pickle")
    LAST_LOAD["source"] = "validated-inputs cache: corpus/chunks/questions hit, run file read"
    if not (isinstance(base, tuple) and len(base) == 4):
        LAST_LOAD["source"] = "validated-inputs cache: miss, every file read and validated"
        base = _read_base(data_dir, chunk_size, chunk_overlap)
        _keep(root / f"base-{base_key}.pickle", base)
    ws = dataclasses.replace(_read_workspace(data_dir, run, default_context_k, *base), inputs_key=ws_key)
    _keep(root / f"ws-{ws_key}.pickle", ws)
    return _handing_over(ws) if hand_over else ws


def _handing_over(ws: Workspace) -> Workspace:
    """`ws`, kept for the next load of the same inputs in this process (_HANDOVER)."""
    _HANDOVER.clear()
    _HANDOVER[ws.inputs_key] = ws
    return ws


def drop_handover() -> None:
    """Forget a workspace handed over and not taken (the run ended before its `load`)."""
    _HANDOVER.clear()


def _read_base(data_dir: Path, chunk_size: int, chunk_overlap: int
               ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, str]]:
    """corpus, chunks, questions and their files' md5s: what every run of a data dir shares."""
    files: dict[str, str] = {}
    corpus, h = load_corpus(data_dir)
    files.update(h)
    chunks, h = _load_chunks(data_dir, corpus, chunk_size, chunk_overlap)
    files.update(h)
    questions, h = _load_questions(data_dir)
    files.update(h)
    return corpus, chunks, questions, files


def _read_workspace(data_dir: Path, run: str | None, default_context_k: int, corpus: pd.DataFrame,
                    chunks: pd.DataFrame, questions: pd.DataFrame, base_files: dict[str, str]) -> Workspace:
    files = dict(base_files)
    if run is None:
        answers, retrieved = _empty_answers(), _retrieved_frame({k: [] for k in _RETRIEVED_COLS})
    else:
        (answers, retrieved, chunks), h = _load_run(
            data_dir, run, corpus, chunks, questions, default_context_k
        )
        files.update(h)
    return Workspace(
        data_dir=data_dir,
        run=run,
        corpus=corpus,
        chunks=chunks,
        questions=questions,
        answers=answers,
        retrieved=retrieved,
        input_files=dict(sorted(files.items())),
    )


def checked_workspace(data_dir: str | Path, run: str | None, settings: Settings,
                      hand_over: bool = False) -> Workspace:
    """Load and validate every input (InputError on the first problem). `hand_over`: the
    flow about to run in this process takes this workspace as it is (load_workspace)."""
    return load_workspace(data_dir, run, settings.chunking.size, settings.chunking.overlap,
                          settings.pipeline.default_context_k, hand_over)


# Not cached by Prefect: reading and validating the files is the point (and it is cheap).
# The workspace is not handed in as an argument: the flow would have to take it as a flow
# parameter, and Prefect serialises every flow parameter for its API (fastapi's
# jsonable_encoder: a deep copy of every DataFrame of a dataclass before it gives up and
# stores "<Workspace>" — measured 1.75 s at 100k chunks) and validates it. A caller that
# validated the inputs (prepare_run, flows/evaluation.py) handed them over (_HANDOVER):
# loading them here takes that workspace while the files' md5s still give its key; without
# a hand-over it is the validated-inputs cache's hit, not a second parse.
@task(name="load", cache_policy=NO_CACHE)
def load_inputs(data_dir: str | Path, run: str | None, settings: Settings) -> Workspace:
    """The inputs, loaded and validated (from the validated-inputs cache when unchanged)."""
    return checked_workspace(data_dir, run, settings)
