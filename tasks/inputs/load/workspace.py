"""The validated workspace, the validated-inputs cache, and the Prefect `load` task."""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE
from ragspan.tasks.config import Settings, loader_version
from ragspan.tasks.core.corpus_identity import IDENTITY_VERSION, corpus_document_hashes
from ragspan.tasks.errors import InputError
from ragspan.tasks.inputs.load.chunks import _load_chunks
from ragspan.tasks.inputs.load.corpus_store import StoredCorpus, stored_corpus
from ragspan.tasks.inputs.load.files import TABLE_SUFFIXES
from ragspan.tasks.inputs.load.questions import _load_questions
from ragspan.tasks.inputs.load.runs import (
    _RETRIEVED_COLS,
    _empty_answers,
    _load_run,
    _retrieved_frame,
)
from ragspan.tasks.inputs.validated_cache import cached_entry, keep_entry, kept_with_inputs
from ragspan.tasks.state import file_md5s, release_free_heap, store_path, touch


@dataclass(frozen=True, eq=False)  # eq=False: comparing DataFrames with == is ambiguous
class InputTables:
    """The large tables of a workspace: what an unchanged re-run never reads (its results
    are kept whole, tasks/reporting/snapshot.py), kept in their own cache entry."""

    stored_corpus: StoredCorpus | None  # the corpus store's entry (None: a head's, no tables)
    chunks: pd.DataFrame  # Chunks: chunk_id, doc_id, char_start, char_end (+ run's ad-hoc chunks)
    retrieved: pd.DataFrame  # Retrieved (empty, typed, when run is None)

    @property
    def corpus(self) -> pd.DataFrame:
        """Corpus: doc_id, text, metadata columns — its texts memory-mapped from the store."""
        return self.stored_corpus.frame() if self.stored_corpus is not None else pd.DataFrame()

    def whole(self) -> bool:
        """The corpus entry these tables name is still in the store (pruning may remove it)."""
        return self.stored_corpus is None or self.stored_corpus.exists()


class DeferredTables:
    """InputTables read from their validated-inputs cache entry at first use. An entry gone
    or damaged meanwhile: the input files are read and validated again, once their md5s
    are checked to still give the workspace's key (else InputError: they changed under
    the run). Pickled, it is the tables themselves."""

    def __init__(self, path: Path, inputs_key: str, current_key: Callable[[], str],
                 reread: Callable[[], InputTables]) -> None:
        self.path, self._key, self._current_key, self._reread = path, inputs_key, current_key, reread
        self._tables: InputTables | None = None
        self._lock = threading.Lock()

    def get(self) -> InputTables:
        with self._lock:
            if self._tables is None:
                tables = _cached(self.path)
                if not (isinstance(tables, InputTables) and tables.whole()):
                    if self._current_key() != self._key:
                        raise InputError(self.path, None, None, "the input files changed during the run")
                    tables = self._reread()
                    _keep(self.path, tables)
                self._tables = tables
            return self._tables

    def __reduce__(self) -> tuple:
        tables = self.get()
        return InputTables, (tables.stored_corpus, tables.chunks, tables.retrieved)


@dataclass(frozen=True, eq=False)  # eq=False: comparing DataFrames with == is ambiguous
class Workspace:
    data_dir: Path
    run: str | None
    questions: pd.DataFrame  # Questions: question_id, question, reference_answer, metadata
    answers: pd.DataFrame  # Answers (empty, typed, when run is None)
    input_files: dict[str, str]  # path relative to data_dir (posix) -> md5 of the bytes
    # corpus, chunks, retrieved (the properties below): read at first use when deferred.
    tables: InputTables | DeferredTables
    # The validated-inputs key (below): every input file's md5, the run, the loader's
    # arguments and code. What follows from these inputs alone may be kept under it
    # (`kept_with_inputs`: the corpus index's name). "" when not known.
    inputs_key: str = ""

    def _input_tables(self) -> InputTables:
        return self.tables.get() if isinstance(self.tables, DeferredTables) else self.tables

    @property
    def corpus(self) -> pd.DataFrame:
        return self._input_tables().corpus

    @property
    def chunks(self) -> pd.DataFrame:
        return self._input_tables().chunks

    @property
    def retrieved(self) -> pd.DataFrame:
        return self._input_tables().retrieved

    @property
    def document_hashes(self) -> pd.Series:
        """doc_id → the document's hash (its text and chunk rows: tasks/core/corpus_identity.py),
        computed once per validated-inputs entry and kept beside it; the texts' hashes are
        the corpus store's, made as the texts were read."""
        def computed() -> pd.Series:
            stored = self._input_tables().stored_corpus
            hashes = stored.text_hashes() if stored is not None else None
            return corpus_document_hashes(self.chunks, self.corpus, hashes)

        return kept_with_inputs(self.inputs_key, "dochash", IDENTITY_VERSION, computed)


# --------------------------------------------------------------------------- workspace


# Validated inputs are kept under <state>/inputs/ at two levels: the corpus, chunks and
# questions ("base-*", keyed by the files they can be read from) and the
# whole workspace of one run (keyed by the base and the run file: Workspace.inputs_key),
# each also by the loader's arguments and the code version. A workspace is two entries:
# "ws-*" (questions, answers, md5s) and "tables-*" (corpus, chunks, retrieved: ~90 % of
# the bytes), read at first use — an unchanged re-run, whose results are kept, never does. A key hashes the files' relative paths and
# bytes (md5: ~0.1 s for a 50 MB corpus), so a copy of the data elsewhere (a CI clone, a
# DVC checkout) hits too, and any edit misses. Parsing and validating 100k chunks and 10k
# answers takes ~2.3 s, reading a workspace back ~0.1 s — so the flow's load task does not
# redo what the CLI just did, a re-run on unchanged files starts at once, and a changed
# run file re-reads only itself. Only valid inputs are kept; the INPUT_CACHE_KEEP most
# recent of each level (tasks/inputs/validated_cache.py). The store is the store layer's `inputs`
# (tasks/state/_store.py): each entry a sealed file, written aside and renamed, healed when it
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


_cached, _keep = cached_entry, keep_entry


# How the last load_workspace of this process got its inputs (`ragspan evaluate --verbose`).
LAST_LOAD: dict[str, str] = {}


def load_workspace(
    data_dir: str | Path,
    run: str | None,
    chunk_size: int,
    chunk_overlap: int,
    default_context_k: int,
    deferred: bool = False,
) -> Workspace:
    """Load and validate everything one evaluation needs; the first problem raises InputError.
    Unchanged files are served from the validated-inputs cache (above). `deferred`: the
    workspace returned holds its large tables only as the cache entry they were kept in,
    read at first use — what a caller that validates for a flow to come keeps, so the
    process never holds them twice (the flow's `load` reads them from the same entry)."""

    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise InputError(data_dir, None, None, "data directory not found")
    root = store_path("inputs")
    base_key, ws_key = _input_keys(data_dir, run, (chunk_size, chunk_overlap), (default_context_k,))
    tables_path = root / f"tables-{ws_key}.pickle"

    def current_key() -> str:
        return _input_keys(data_dir, run, (chunk_size, chunk_overlap), (default_context_k,))[1]

    def reread() -> InputTables:
        base = _read_base(data_dir, chunk_size, chunk_overlap)
        return _read_workspace(data_dir, run, default_context_k, *base)._input_tables()

    def with_deferred_tables(head: Workspace) -> Workspace:
        return dataclasses.replace(head, data_dir=data_dir, inputs_key=ws_key,
                                   tables=DeferredTables(tables_path, ws_key, current_key, reread))

    head = _cached(root / f"ws-{ws_key}.pickle")
    if isinstance(head, Workspace):  # its tables (and their corpus entry) checked at first use
        LAST_LOAD["source"] = "validated-inputs cache: hit"
        touch(tables_path)  # used with its head: pruned with it, not before it
        return with_deferred_tables(head)
    base = _cached(root / f"base-{base_key}.pickle")
    LAST_LOAD["source"] = "validated-inputs cache: corpus/chunks/questions hit, run file read"
    if not (isinstance(base, tuple) and len(base) == 4 and isinstance(base[0], StoredCorpus) and base[0].exists()):
        LAST_LOAD["source"] = "validated-inputs cache: miss, every file read and validated"
        base = _read_base(data_dir, chunk_size, chunk_overlap)
        _keep(root / f"base-{base_key}.pickle", base)
    ws = dataclasses.replace(_read_workspace(data_dir, run, default_context_k, *base), inputs_key=ws_key)
    # Two entries: the large tables apart from the rest, which is all an unchanged re-run
    # reads (~7 MB of 76 at 100k chunks × 10k answers). The tables first: a head is only
    # ever found with its tables written (or, gone since, read again from the files).
    _keep(tables_path, ws._input_tables())
    no_tables = InputTables(None, pd.DataFrame(), pd.DataFrame())  # a head's: read as deferred
    _keep(root / f"ws-{ws_key}.pickle", dataclasses.replace(ws, tables=no_tables))
    kept = with_deferred_tables(ws) if deferred else ws
    del ws
    release_free_heap()  # the batches read and the pickles written: not kept resident
    return kept


def _read_base(data_dir: Path, chunk_size: int, chunk_overlap: int
               ) -> tuple[StoredCorpus, pd.DataFrame, pd.DataFrame, dict[str, str]]:
    """corpus (its store entry), chunks, questions and their files' md5s: what every run of
    a data dir shares."""
    files: dict[str, str] = {}
    stored, h = stored_corpus(data_dir)
    files.update(h)
    chunks, h = _load_chunks(data_dir, stored.frame(), chunk_size, chunk_overlap, doc_lengths=stored.text_lengths())
    files.update(h)
    questions, h = _load_questions(data_dir)
    files.update(h)
    return stored, chunks, questions, files


def _read_workspace(data_dir: Path, run: str | None, default_context_k: int, stored: StoredCorpus,
                    chunks: pd.DataFrame, questions: pd.DataFrame, base_files: dict[str, str]) -> Workspace:
    files = dict(base_files)
    if run is None:
        answers, retrieved = _empty_answers(), _retrieved_frame({k: [] for k in _RETRIEVED_COLS})
    else:
        (answers, retrieved, chunks), h = _load_run(
            data_dir, run, stored.frame(), chunks, questions, default_context_k
        )
        files.update(h)
    return Workspace(
        data_dir=data_dir,
        run=run,
        questions=questions,
        answers=answers,
        input_files=dict(sorted(files.items())),
        tables=InputTables(stored_corpus=stored, chunks=chunks, retrieved=retrieved),
    )


def checked_workspace(data_dir: str | Path, run: str | None, settings: Settings,
                      deferred: bool = False) -> Workspace:
    """Load and validate every input (InputError on the first problem). `deferred`: keep
    only the head in memory, the large tables in their cache entry (load_workspace)."""
    return load_workspace(data_dir, run, settings.chunking.size, settings.chunking.overlap,
                          settings.pipeline.default_context_k, deferred)


# Not cached by Prefect: reading and validating the files is the point (and it is cheap).
# The workspace is not handed in as an argument: the flow would have to take it as a flow
# parameter, and Prefect serialises every flow parameter for its API (fastapi's
# jsonable_encoder: a deep copy of every DataFrame of a dataclass before it gives up and
# stores "<Workspace>" — measured 1.75 s at 100k chunks) and validates it. Nor is it handed
# over through a variable of this module: the validated-inputs cache is the hand-over, keyed
# by the files' content. A caller that validated the inputs (prepare_run) kept them there,
# so loading them here is its hit — the small head now, the large tables at first use —
# not a second parse.
@task(name="load", cache_policy=NO_CACHE)
def load_inputs(data_dir: str | Path, run: str | None, settings: Settings) -> Workspace:
    """The inputs, loaded and validated (from the validated-inputs cache when unchanged)."""
    return checked_workspace(data_dir, run, settings)
