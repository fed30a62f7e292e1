"""Shard results on disk (tasks/reuse/shard_spill.py, flows/shard_window.py) and file md5s
remembered by stat fingerprint (tasks/state/_digests.py): what they give back is what was
there, and what they hold in memory is bounded."""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
from ragspan.flows.shard_window import spilled_results
from ragspan.tasks.core.shards import Shard
from ragspan.tasks.reuse.answer_store import merged, split_known
from ragspan.tasks.reuse.shard_spill import spill, spilling
from ragspan.tasks.state._digests import DIGESTS_FILE, file_md5s
from test_reuse import CTX, _answers, _passages, _result


def test_tables_assembled_from_spilled_shards_equal_those_assembled_in_memory(tmp_path: Path):
    answers = _answers(4)
    reuse = split_known(answers, _passages(4), tmp_path / "store", CTX, enabled=True)
    parts = [_result(["q3", "q1"]), _result(["q0"], retry=frozenset({"q0"})), _result(["q2"])]
    with spilling(tmp_path / "spill") as where:
        on_disk = [spill(p, where, i) for i, p in enumerate(parts)]
        from_disk = merged(reuse, answers, on_disk)
        assert len(list(where.iterdir())) == 3
    assert not (tmp_path / "spill" / where.name).exists()  # removed once the block ends
    in_memory = merged(reuse, answers, parts)
    for name in ("claims", "spans", "diagnoses"):
        pd.testing.assert_frame_equal(getattr(from_disk, name), getattr(in_memory, name), obj=name)
    pd.testing.assert_frame_equal(from_disk.answer_spans_table(), in_memory.answer_spans_table())
    assert from_disk.stats == in_memory.stats and from_disk.retry == in_memory.retry == frozenset({"q0"})
    assert list(from_disk.claims["question_id"]) == ["q0", "q1", "q2", "q3"]


def test_a_dead_runs_spill_directory_is_removed_by_the_next_run(tmp_path: Path):
    dead = tmp_path / "spill" / "999999999-1"  # no such process
    dead.mkdir(parents=True)
    with spilling(tmp_path / "spill") as mine:
        assert not dead.exists() and mine.is_dir()


def test_the_window_never_holds_more_than_in_flight_shards_and_keeps_their_order(tmp_path: Path):
    answers = _answers(7)
    shards = (Shard(i, answers.iloc[[i]], _passages(1)) for i in range(7))
    submitted, most = 0, 0
    with ThreadPoolExecutor(2) as pool, spilling(tmp_path / "spill") as where:
        def submit(shard: Shard):
            nonlocal submitted, most
            submitted += 1  # submitted and not yet spilled, this one included
            most = max(most, submitted - sum(1 for p in where.iterdir() if p.name.startswith("shard-")))
            return pool.submit(_result, list(shard.answers["question_id"]))

        done = spilled_results(submit, shards, 3, where)
        assert [Path(d.path).name for d in done] == [f"shard-{i:05d}" for i in range(7)]
        got = merged(split_known(answers, _passages(7), tmp_path / "s", CTX, enabled=False), answers, done)
    assert list(got.claims["question_id"]) == [f"q{i}" for i in range(7)]
    assert submitted == 7 and most == 3


def test_a_file_is_hashed_again_when_it_changes_and_not_while_it_stays(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("RAGSPAN_HOME", str(tmp_path / "state"))
    f = tmp_path / "corpus.jsonl"
    f.write_bytes(b"one\n")
    assert file_md5s([f]) == [hashlib.md5(b"one\n").hexdigest()]
    assert (tmp_path / "state" / DIGESTS_FILE).is_file()
    f.write_bytes(b"two\n")  # same size, new content: the stat fingerprint moved
    assert file_md5s([f]) == [hashlib.md5(b"two\n").hexdigest()]
    st = os.stat(f)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # only ctime moves: still re-hashed correctly
    reads: list[Path] = []
    from ragspan.tasks.state import _digests as digests

    real = digests._md5_of_bytes
    monkeypatch.setattr(digests, "_md5_of_bytes", lambda p: reads.append(p) or real(p))
    assert file_md5s([f]) == [hashlib.md5(b"two\n").hexdigest()]
    reads.clear()
    assert file_md5s([f, f]) == [hashlib.md5(b"two\n").hexdigest()] * 2
    assert reads == []  # unchanged since it was last hashed: not read


def test_a_table_written_in_pieces_equals_the_assembled_one_whatever_byte_columns_a_step_left(tmp_path: Path):
    """diagnose leaves empty byte-offset columns in its table, chunk_split does not: the
    pieces of one table drop them (they are computed on write), so they share columns."""
    import dataclasses

    from ragspan.tasks.core.schemas import WRITE_ONLY
    from ragspan.tasks.reuse.answer_store import RunParts
    from ragspan.tasks.state._atomic import write_parquet_pieces

    answers = _answers(5)
    reuse = split_known(answers, _passages(5), tmp_path / "s", CTX, enabled=False)
    first = _result(["q0", "q1"])
    empty = pd.array([None, None], dtype="Int64")
    first = dataclasses.replace(first, diagnoses=first.diagnoses.assign(byte_start=empty, byte_end=empty))
    parts = [first, _result(["q2"]), _result(["q4", "q3"])]
    with spilling(tmp_path / "spill") as where:
        run = RunParts(reuse, answers, [spill(p, where, i) for i, p in enumerate(parts)])
        for name in ("claims", "spans", "diagnoses", "answer_spans"):
            rows = write_parquet_pieces(tmp_path / f"{name}.parquet", run.chunks(name))
            whole = _table_of_merged(merged(reuse, answers, parts), name)
            expected = whole.drop(columns=[c for c in WRITE_ONLY if c in whole.columns])
            pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / f"{name}.parquet"), expected, obj=name)
            assert rows == len(expected)
    assert list(pd.read_parquet(tmp_path / "claims.parquet")["question_id"]) == [f"q{i}" for i in range(5)]


def _table_of_merged(run, name: str) -> pd.DataFrame:
    return run.answer_spans_table() if name == "answer_spans" else getattr(run, name)
