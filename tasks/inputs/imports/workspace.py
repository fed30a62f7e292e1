"""`ragspan import`'s one effectful step: read the source, copy the corpus, place the
contexts, write the data directory — whole or not at all (tasks/state/_atomic.py)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from ragspan.tasks.errors import InputError, UsageError
from ragspan.tasks.inputs.imports import DEFAULT_ID_KEYS, FORMATS
from ragspan.tasks.inputs.imports.model import Parsed, build
from ragspan.tasks.inputs.load.files import CORPUS_FILE_SUFFIXES, TABLE_SUFFIXES, find_table
from ragspan.tasks.state import write_atomic_dir

REPORT_FILE = "import-report.json"


def read_source(fmt: str, path: Path, mapping: dict[str, str] | None = None,
                doc_id_key: str | None = None) -> Parsed:
    """The records of FILE in format `fmt` (pure parsing; InputError on bad input).
    `doc_id_key`: the document metadata key naming the corpus document (openinference)."""
    if doc_id_key is not None and fmt != "openinference":
        raise UsageError("--doc-id-key is for the openinference format only")
    if not Path(path).is_file():
        raise InputError(path, None, None, "file not found")
    if fmt == "ragas":
        from ragspan.tasks.inputs.imports import ragas

        return ragas.parse(path)
    if fmt == "openinference":
        from ragspan.tasks.inputs.imports import openinference

        return openinference.parse(path, (doc_id_key,) if doc_id_key else DEFAULT_ID_KEYS)
    if fmt == "mapping":
        from ragspan.tasks.inputs.imports import mapping as table

        if not mapping:
            raise UsageError("the mapping format needs --map question=COL answer=COL contexts=COL")
        return table.parse(path, mapping)
    raise UsageError(f"unknown import format {fmt!r} (one of {', '.join(FORMATS)})")


def default_run_name(path: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(path).stem).strip("-.")
    return name or "imported"


def import_workspace(fmt: str, source: Path, corpus: Path, out: Path, run: str | None = None,
                     mapping: dict[str, str] | None = None, doc_id_key: str | None = None) -> dict[str, Any]:
    """Write the data directory `out` (corpus, questions, runs/<run>.jsonl and the report)
    and return the report. `out` must not exist or be empty."""
    from ragspan.tasks.inputs.load import load_corpus

    source, corpus, out = Path(source), Path(corpus), Path(out)
    run = run or default_run_name(source)
    if "/" in run or "\\" in run or run.startswith("."):
        raise UsageError(f"invalid run name {run!r}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"{out} already exists and is not empty: choose another --out or remove it")
    parsed = read_source(fmt, source, mapping, doc_id_key)  # bad input stops here, before anything is written
    if not parsed.records:
        why = [f"{s.source}: {s.reason}" for s in parsed.skipped[:5]] + parsed.notes
        raise InputError(source, None, None, "nothing to import: " + ("; ".join(why) or "no records"))
    state: dict[str, Any] = {}

    def questions(path: Path) -> None:  # the corpus copies are in place: place the contexts
        try:
            docs, _ = load_corpus(path.parent)
        except InputError as e:  # name the user's file, not its copy
            raise InputError(_source_of(Path(e.file), path.parent, corpus), e.row, e.field, e.message) from None
        state["built"] = build(parsed, docs["doc_id"].tolist(), docs["text"].tolist())
        state["documents"] = len(docs)
        _write_jsonl(path, state["built"].questions)

    def runs(path: Path) -> None:
        path.mkdir()
        _write_jsonl(path / f"{run}.jsonl", state["built"].runs)

    def report(path: Path) -> None:
        state["report"] = {"format": fmt, "source": str(source), "corpus": str(corpus), "run": run,
                           "documents": state["documents"], **state["built"].report}
        path.write_text(json.dumps(state["report"], indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    # Built in a temp dir beside `out`, swapped in whole (tasks/state/_atomic.py): a failure
    # anywhere leaves nothing.
    write_atomic_dir(out, {**_corpus_writers(corpus), "questions.jsonl": questions, "runs": runs,
                           REPORT_FILE: report})
    return state["report"]


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def _corpus_writers(corpus: Path) -> dict[str, Callable[[Path], None]]:
    """CORPUS as the workspace's corpus: a table file, a data directory's corpus (and
    chunks), or a folder of .txt/.md files — copied byte for byte, so offsets hold."""
    if corpus.is_file():
        if corpus.suffix.lower() not in TABLE_SUFFIXES:
            raise InputError(corpus, None, None, f"unsupported corpus file type '{corpus.suffix}' "
                                                 "(use .jsonl, .csv or .parquet, or a folder of .txt/.md files)")
        return {f"corpus{corpus.suffix.lower()}": partial(shutil.copyfile, corpus)}
    if not corpus.is_dir():
        raise InputError(corpus, None, None, "corpus not found")
    table = find_table(corpus, "corpus", required=False)
    if table is None and not (corpus / "corpus").is_dir():  # a folder of documents
        return {"corpus": partial(_copy_folder, corpus)}
    writers: dict[str, Callable[[Path], None]] = {}  # a data directory
    if table is not None:
        writers[table.name] = partial(shutil.copyfile, table)
    if (corpus / "corpus").is_dir():
        writers["corpus"] = partial(_copy_folder, corpus / "corpus")
    chunks = find_table(corpus, "chunks", required=False)
    if chunks is not None:
        writers[chunks.name] = partial(shutil.copyfile, chunks)
    return writers


def _source_of(copy: Path, stage: Path, corpus: Path) -> Path:
    """The CORPUS file a staged copy came from."""
    try:
        rel = copy.relative_to(stage)
    except ValueError:
        return copy
    if corpus.is_file():
        return corpus
    if rel.parts and rel.parts[0] == "corpus" and not (corpus / "corpus").is_dir() \
            and find_table(corpus, "corpus", required=False) is None:  # a folder of documents
        return corpus.joinpath(*rel.parts[1:])
    return corpus / rel


def _copy_folder(src: Path, dst: Path) -> None:
    dst.mkdir()
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src)
        if p.is_file() and p.suffix.lower() in CORPUS_FILE_SUFFIXES and not any(
                part.startswith(".") for part in rel.parts):
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dst / rel)
