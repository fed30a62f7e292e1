"""The validated workspace, the validated-inputs cache, and the Prefect `load` task."""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE
from ragspan.tasks.config import Settings, loader_version, state_dir
from ragspan.tasks.errors import InputError
from ragspan.tasks.io.digests import file_md5s
from ragspan.tasks.io.load.chunks import _load_chunks
from ragspan.tasks.io.load.corpus import load_corpus
from ragspan.tasks.io.load.files import TABLE_SUFFIXES
from ragspan.tasks.io.load.questions import _load_questions
from ragspan.tasks.io.load.runs import _RETRIEVED_COLS, _empty_answers, _load_run, _retrieved_frame
from ragspan.tasks.io.store import dir_store


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
# recent of each level. The store is the store layer's `inputs` (tasks/io/store.py): each
# entry a sealed file, written aside and renamed, healed when it cannot be read.
INPUT_CACHE_KEEP = 3


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


def _cached(path: Path) -> Any:
    """The value kept at `path`, or None: missing (in silence), or unreadable — a
    checksum mismatch, a truncated file, a pickle of another pandas — which is moved
    aside with one warning line, and the inputs are read from their files again. A read
    marks the entry used: kept by the pruning in _keep."""
    return dir_store("inputs", path.parent).read_file(path.name, pickle.loads,
                                                      "reading and validating the input files again")


def _keep(path: Path, value: Any) -> None:
    """Written aside, then renamed: an entry appears whole or not at all. A failure (a
    read-only state dir, a full disk: DiskFull, the store as it was) only costs the next
    load a full read."""
    store = dir_store("inputs", path.parent)
    try:
        store.write_file(path.name, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        store.keep_newest(INPUT_CACHE_KEEP, f"{path.name.split('-', 1)[0]}-*.pickle")  # per level
    except OSError:  # DiskFull included
        return


# How the last load_workspace of this process got its inputs (`ragspan evaluate --verbose`).
LAST_LOAD: dict[str, str] = {}


def load_workspace(
    data_dir: str | Path,
    run: str | None,
    chunk_size: int,
    chunk_overlap: int,
    default_context_k: int,
) -> Workspace:
    """Load and validate everything one evaluation needs; the first problem raises InputError.
    Unchanged files are served from the validated-inputs cache (see INPUT_CACHE_KEEP)."""

    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise InputError(data_dir, None, None, "data directory not found")
    root = state_dir() / "inputs"
    base_key, ws_key = _input_keys(data_dir, run, (chunk_size, chunk_overlap), (default_context_k,))
    ws = _cached(root / f"ws-{ws_key}.pickle")
    if isinstance(ws, Workspace):
        LAST_LOAD["source"] = "validated-inputs cache: hit"
        return dataclasses.replace(ws, data_dir=data_dir)
    base = _cached(root / f"base-{base_key}.pickle")
    LAST_LOAD["source"] = "validated-inputs cache: corpus/chunks/questions hit, run file read"
    if not (isinstance(base, tuple) and len(base) == 4):
        LAST_LOAD["source"] = "validated-inputs cache: miss, every file read and validated"
        base = _read_base(data_dir, chunk_size, chunk_overlap)
        _keep(root / f"base-{base_key}.pickle", base)
    ws = _read_workspace(data_dir, run, default_context_k, *base)
    _keep(root / f"ws-{ws_key}.pickle", ws)
    return ws


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


def checked_workspace(data_dir: str | Path, run: str | None, settings: Settings) -> Workspace:
    """Load and validate every input (InputError on the first problem)."""
    return load_workspace(data_dir, run, settings.chunking.size, settings.chunking.overlap,
                          settings.pipeline.default_context_k)


# Not cached by Prefect: reading and validating the files is the point (and it is cheap).
# The workspace is not handed in as an argument: the flow would have to take it as a flow
# parameter, and Prefect serialises every flow parameter for its API (fastapi's
# jsonable_encoder: a deep copy of every DataFrame of a dataclass before it gives up and
# stores "<Workspace>" — measured 1.75 s at 100k chunks) and validates it. A caller that
# validated the inputs (prepare_run, flows/evaluation.py) left them in the validated-inputs
# cache: loading them here again is that cache's hit (~0.1 s), not a second parse.
@task(name="load", cache_policy=NO_CACHE)
def load_inputs(data_dir: str | Path, run: str | None, settings: Settings) -> Workspace:
    """The inputs, loaded and validated (from the validated-inputs cache when unchanged)."""
    return checked_workspace(data_dir, run, settings)
