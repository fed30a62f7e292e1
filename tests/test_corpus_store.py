"""The corpus store: the corpus read a batch at a time into a memory-mapped entry of the
state dir (tasks/inputs/load/corpus_store.py), equal to reading it whole; bad input stops with
its file, row and field and leaves nothing; a damaged entry is read again."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from ragspan.tasks.config import load_settings
from ragspan.tasks.core.corpus_identity import text_hashes
from ragspan.tasks.errors import InputError
from ragspan.tasks.inputs.load import checked_workspace
from ragspan.tasks.inputs.load.batches import jsonl_arrow_batches
from ragspan.tasks.inputs.load.chunks import _ARROW_SCHEMA, _load_chunks
from ragspan.tasks.inputs.load.corpus_store import TEXTS_FILE, stored_corpus

from tests.conftest import SAMPLE

RECORDS = [json.loads(line) for line in (SAMPLE / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
ONE_RECORD = 1  # bytes per batch: every record its own batch


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _forms(tmp: Path) -> dict[str, Path]:
    """The sample corpus as JSONL (a metadata key met only late), CSV, Parquet and a folder."""
    late = RECORDS[:5] + [dict(r, rank=i) for i, r in enumerate(RECORDS[5:])]  # "rank" first met in batch 6
    frame = pd.DataFrame(RECORDS)
    (tmp / "csv").mkdir()
    frame.to_csv(tmp / "csv" / "corpus.csv", index=False)
    (tmp / "parquet").mkdir()
    frame.assign(n=[None if i == 3 else i for i in range(len(frame))]).to_parquet(tmp / "parquet" / "corpus.parquet")
    folder = tmp / "folder" / "corpus" / "sub"
    folder.mkdir(parents=True)
    for i, r in enumerate(RECORDS[:6]):
        (folder.parent / ("sub" if i % 2 else "") / f"{i}.md").write_text(r["text"], encoding="utf-8")
    return {"jsonl": _jsonl(tmp / "jsonl", late), "csv": tmp / "csv", "parquet": tmp / "parquet",
            "folder": tmp / "folder"}


@pytest.mark.usefixtures("state_dir")
def test_a_corpus_read_in_batches_equals_one_read_whole(tmp_path: Path):
    for form, data in _forms(tmp_path).items():
        whole, md5s = stored_corpus(data)
        frame = whole.frame()
        for entry in whole.path.parent.iterdir():  # the next read is a fresh one, in batches
            if entry.is_dir():
                for f in entry.iterdir():
                    f.unlink()
                entry.rmdir()
        batched, md5s_again = stored_corpus(data, batch_bytes=ONE_RECORD)
        again = batched.frame()
        assert frame.equals(again) and list(frame.dtypes) == list(again.dtypes), form
        assert md5s == md5s_again and len(frame) > 1, form
        assert np.array_equal(batched.text_hashes(), text_hashes(frame["text"].tolist())), form
    late = stored_corpus(tmp_path / "jsonl")[0].frame()
    assert late["rank"].isna().sum() == 5 and late["rank"].iloc[5:].tolist() == list(range(len(RECORDS) - 5))


@pytest.mark.usefixtures("state_dir")
def test_bad_input_in_a_later_batch_names_its_row_and_leaves_nothing(tmp_path: Path, state_dir: Path):
    bad = [*RECORDS[:7], dict(RECORDS[7], text="   "), *RECORDS[8:], RECORDS[2]]
    data = _jsonl(tmp_path / "bad", bad)
    with pytest.raises(InputError) as err:
        stored_corpus(data, batch_bytes=ONE_RECORD)
    assert (err.value.row, err.value.field) == (8, "text") and "whitespace-only" in str(err.value)
    duplicate = _jsonl(tmp_path / "dup", [*RECORDS, RECORDS[2]])
    with pytest.raises(InputError, match=r"row \d+, field 'doc_id': duplicate doc_id .* \(first at row 3\)"):
        stored_corpus(duplicate, batch_bytes=ONE_RECORD)
    store = state_dir / "corpus"
    assert not store.exists() or not any(store.iterdir())  # no entry, no half-written leftover


@pytest.mark.usefixtures("state_dir")
def test_the_workspace_keeps_the_corpus_texts_in_the_store_not_in_its_cache(tmp_path: Path, state_dir: Path):
    ws = checked_workspace(SAMPLE, "baseline", load_settings(None))
    corpus_bytes = sum(len(t.encode()) for t in ws.corpus["text"])
    kept = b"".join(p.read_bytes() for p in (state_dir / "inputs").glob("*.pickle"))
    assert all(t[:300].encode() not in kept for t in ws.corpus["text"])  # no text in the inputs cache
    entries = [p for p in (state_dir / "corpus").iterdir() if p.is_dir()]
    assert len(entries) == 1 and (entries[0] / TEXTS_FILE).stat().st_size == corpus_bytes  # UTF-8, as read
    sent = pickle.dumps(ws)  # as a Dask worker gets it: the entry's path, not its texts
    assert pickle.loads(sent).corpus.equals(ws.corpus) and ws.corpus["text"].iloc[0][:300].encode() not in sent


@pytest.mark.usefixtures("state_dir")
def test_a_damaged_entry_is_read_again_from_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = _jsonl(tmp_path / "c", RECORDS)
    first, _ = stored_corpus(data)
    before = first.frame()["text"].tolist()  # Python strings: the frame maps the file it damages
    path = first.path / TEXTS_FILE
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    again, _ = stored_corpus(data)
    assert "corpus store entry" in capsys.readouterr().err
    assert (again.path / TEXTS_FILE).read_bytes() != bytes(raw)
    assert again.frame()["text"].tolist() == before


def _chunk_rows() -> list[dict]:
    return [json.loads(line) for line in (SAMPLE / "chunks.jsonl").read_text(encoding="utf-8").splitlines()]


def _write_rows(path: Path, rows: list[dict]) -> None:
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    elif path.suffix == ".csv":
        pd.DataFrame(rows).to_csv(path, index=False)
    else:
        pd.DataFrame(rows).to_parquet(path)


@pytest.mark.usefixtures("state_dir")
def test_a_chunk_table_read_in_batches_equals_one_read_whole(tmp_path: Path):
    corpus = stored_corpus(SAMPLE)[0].frame()
    texts = dict(zip(corpus["doc_id"], corpus["text"]))
    rows = [dict(r, text=texts[r["doc_id"]][r["char_start"]:r["char_end"]]) for r in _chunk_rows()]
    for suffix in ("jsonl", "csv", "parquet"):
        data = tmp_path / suffix
        data.mkdir()
        _write_rows(data / f"chunks.{suffix}", rows)
        whole, md5s = _load_chunks(data, corpus, 800, 100)
        batched, md5s_again = _load_chunks(data, corpus, 800, 100, batch_bytes=ONE_RECORD)
        assert whole.equals(batched) and list(whole.dtypes) == list(batched.dtypes) and md5s == md5s_again, suffix
        assert len(whole) == len(rows) and list(whole.columns) == ["chunk_id", "doc_id", "char_start", "char_end"]


@pytest.mark.usefixtures("state_dir")
def test_a_chunk_id_repeated_across_batches_is_reported_in_file_order(tmp_path: Path):
    corpus = stored_corpus(SAMPLE)[0].frame()
    rows = _chunk_rows()
    out_of_range = dict(rows[0], chunk_id="late", char_end=10**7)
    cases = {  # (rows, the row and field a whole-file read names)
        "duplicate first": ([*rows[:5], rows[1], *rows[5:], out_of_range], (6, "chunk_id")),
        "range first": ([*rows[:3], out_of_range, *rows[3:], rows[1]], (4, "char_end")),
        "duplicate alone": ([*rows, rows[40]], (len(rows) + 1, "chunk_id")),
    }
    for name, (records, (row, field)) in cases.items():
        data = tmp_path / name.replace(" ", "-")
        data.mkdir()
        (data / "chunks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        for batch_bytes in (ONE_RECORD, 1 << 20):
            with pytest.raises(InputError) as err:
                _load_chunks(data, corpus, 800, 100, batch_bytes=batch_bytes)
            assert (err.value.row, err.value.field) == (row, field), (name, batch_bytes, str(err.value))


def _outcome(data: Path, corpus: pd.DataFrame, batch_bytes: int, arrow_jsonl: bool) -> tuple:
    try:
        return ("read", _load_chunks(data, corpus, 800, 100, batch_bytes=batch_bytes, arrow_jsonl=arrow_jsonl)[0])
    except InputError as err:
        return ("refused", str(err), err.row, err.field)


@pytest.mark.usefixtures("state_dir")
def test_a_chunk_table_read_by_arrow_equals_the_strict_reader(tmp_path: Path):
    """Every JSONL quirk the strict reader refuses or reads its own way: the Arrow path
    (tasks/inputs/load/batches.jsonl_arrow_batches + the vectorised checks) gives the same table
    or the same error, in blocks of one line and of the whole file."""
    corpus = stored_corpus(SAMPLE)[0].frame()
    good = [json.dumps(r).encode() for r in _chunk_rows()]
    first = _chunk_rows()[0]

    def line(**changes: object) -> bytes:
        return json.dumps(dict(first, **changes)).encode()

    cases: dict[str, list[bytes]] = {
        "clean": good,
        "crlf": [g + b"\r" for g in good],
        "blank line": [*good[:3], b"", *good[3:]],
        "spaces line": [*good[:3], b"   ", *good[3:]],
        "bom": [b"\xef\xbb\xbf" + good[0], *good[1:]],
        "nan": [*good[:2], line(chunk_id="n").replace(b'"char_start": 0', b'"char_start": NaN'), *good[2:]],
        "float int": [*good[:2], line(chunk_id="f", char_end=float(first["char_end"])), *good[2:]],
        "big int": [*good[:2], line(chunk_id="b", char_end=2**70), *good[2:]],
        "repeated key": [*good[:2], b'{"chunk_id": "r", "chunk_id": "s", "doc_id": "%s", "char_start": 0, "char_end": 5}'
                         % first["doc_id"].encode(), *good[2:]],
        "blank id": [*good[:2], line(chunk_id="\u00a0 \u3000"), *good[2:]],
        "non-ascii id": [*good[:2], line(chunk_id="文書-一"), *good[2:]],
        "tab in a string": [*good[:2], line(chunk_id="t").replace(b'"t"', b'"t\tx"'), *good[2:]],
        "tab between tokens": [g.replace(b", ", b",\t") for g in good],
        "lone surrogate": [*good[:2], line(chunk_id="s").replace(b'"s"', b'"s\\ud800"'), *good[2:]],
        "extra key": [*good[:2], line(chunk_id="x", section="intro"), *good[2:]],
        "missing key": [*good[:2], json.dumps({k: v for k, v in first.items() if k != "char_end"}).encode(), *good[2:]],
        "unknown document": [*good[:2], line(chunk_id="u", doc_id="nowhere"), *good[2:]],
        "empty range": [*good[:2], line(chunk_id="e", char_start=4, char_end=4), *good[2:]],
        "out of range": [*good[:2], line(chunk_id="o", char_end=10**7), *good[2:]],
        "repeated id": [*good[:4], good[1], *good[4:]],
        "bad utf-8": [*good[:2], line(chunk_id="v").replace(b'"v"', b'"v\xff"'), *good[2:]],
        "null": [*good[:2], line(chunk_id=None), *good[2:]],
        "not an object": [*good[:2], b"[1, 2]", *good[2:]],
        "bool offset": [*good[:2], line(chunk_id="o", char_start=True), *good[2:]],
        "no final newline": good,
    }
    for name, lines in cases.items():
        data = tmp_path / name.replace(" ", "-")
        data.mkdir()
        end = b"" if name == "no final newline" else b"\n"
        (data / "chunks.jsonl").write_bytes(b"\n".join(lines) + end)
        for batch_bytes in (ONE_RECORD, 1 << 20):
            fast, strict = (_outcome(data, corpus, batch_bytes, arrow) for arrow in (True, False))
            assert fast[0] == strict[0], (name, batch_bytes, fast[1:], strict[1:])
            if fast[0] == "read":
                assert fast[1].equals(strict[1]) and list(fast[1].dtypes) == list(strict[1].dtypes), name
            else:
                assert fast == strict, name
    clean = tmp_path / "clean" / "chunks.jsonl"  # the clean table is read by Arrow, not the strict way
    assert all(b.arrow is not None for b in jsonl_arrow_batches(clean, 1 << 20, _ARROW_SCHEMA))
    assert _outcome(tmp_path / "clean", corpus, 1 << 20, True)[0] == "read"  # the cases reach both outcomes
    assert _outcome(tmp_path / "nan", corpus, 1 << 20, True)[0] == "refused"


def test_chunk_rows_are_hashed_the_same_a_slice_at_a_time(monkeypatch: pytest.MonkeyPatch):
    from ragspan.tasks.core import corpus_identity

    rows = pd.DataFrame(_chunk_rows())
    chunks = rows.astype({"chunk_id": "str", "doc_id": "str"})
    whole = corpus_identity.chunk_row_hashes(chunks)
    monkeypatch.setattr(corpus_identity, "_ROW_SLICE", 7)
    assert np.array_equal(corpus_identity.chunk_row_hashes(chunks), whole) and len(whole) == len(rows) > 7
