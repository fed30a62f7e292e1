"""The verdict cache (tasks/judges/verdict_cache.py) with the real local judge: rows
assembled from cached and fresh pairs equal the rows of judging every pair at once, marks
included; damage and pruning by day of last use."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pandas as pd
from conftest import SAMPLE
from ragspan.tasks.judges.local import LOCAL_JUDGE_MODEL, _judge_rows
from ragspan.tasks.judges.verdict_cache import DAY_S, rows_with_cache
from ragspan.tasks.judges.verifier import model_path
from ragspan.tasks.state import _stores as state

MODEL = str(model_path())
JUDGE = f"{LOCAL_JUDGE_MODEL}@test"


def _items(n_claims: int = 12, n_passages: int = 20, offset: int = 0) -> list[tuple[str, list[str], str, bool]]:
    """Sample claims, each against the same run of the sample's chunks."""
    corpus = {d["doc_id"]: d["text"] for d in map(json.loads, (SAMPLE / "corpus.jsonl").read_text().splitlines())}
    chunks = [json.loads(x) for x in (SAMPLE / "chunks.jsonl").read_text().splitlines()]
    texts = [corpus[c["doc_id"]][c["char_start"]:c["char_end"]] for c in chunks]
    claims = pd.read_csv(SAMPLE / "expected_labels.csv")["claim"].tolist()[:n_claims]
    return [(c, texts[offset:offset + n_passages], "", False) for c in claims]


def fresh(items):
    return _judge_rows(MODEL, items)


def test_rows_from_cached_and_fresh_pairs_equal_judging_all_at_once(tmp_path: Path):
    db = tmp_path / "verdicts.sqlite"
    whole = _items()
    expected, _ = fresh(whole)
    assert any(m for rows in expected for r in rows for m in [r[-1]] if m and r[0] == "unsupported")
    # first the claims against two overlapping windows of the passages, each judged alone…
    for offset in (0, 8):
        part = _items(n_passages=8, offset=offset)
        rows, judged, _ = rows_with_cache(part, fresh, JUDGE, db)
        assert rows == fresh(part)[0]
    # …then the whole list: only the passages never seen are judged, the rows are identical
    rows, judged, _rejudged = rows_with_cache(whole, fresh, JUDGE, db)
    assert rows == expected
    assert judged == 12 * 4  # passages 16..19 of each claim were never judged
    again_rows, judged_twice, _ = rows_with_cache(whole, fresh, JUDGE, db)
    assert again_rows == expected and judged_twice == 0


def test_a_damaged_cache_is_moved_aside_and_every_pair_judged(tmp_path: Path, capsys):
    db = tmp_path / "verdicts.sqlite"
    db.write_bytes(b"this is not a database" * 100)
    items = _items(n_claims=3, n_passages=4)
    rows, judged, _ = rows_with_cache(items, fresh, JUDGE, db)
    assert rows == fresh(items)[0] and judged == 12
    assert "verdict cache" in capsys.readouterr().err
    assert rows_with_cache(items, fresh, JUDGE, db)[1] == 0  # rebuilt, and used


def test_pruning_removes_the_days_not_used_since(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("RAGSPAN_HOME", str(tmp_path))
    db = state.store_paths()["verdict_cache"]
    rows_with_cache(_items(n_claims=4, n_passages=5), fresh, JUDGE, db)
    today = int(time.time() // DAY_S)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE verdicts SET day = ? WHERE key IN (SELECT key FROM verdicts LIMIT 8)", (today - 40,))
    conn.close()
    assert sorted(e.key for e in state.entries("verdict_cache")) == sorted([str(today - 40), str(today)])
    removed = state.prune(max_age_s=30 * 86400)
    assert removed["verdict_cache"]["entries"] == 1
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*), MIN(day) FROM verdicts").fetchone() == (12, today)
    conn.close()
    # the pruned pairs are judged again, the others served
    assert rows_with_cache(_items(n_claims=4, n_passages=5), fresh, JUDGE, db)[1] == 8
