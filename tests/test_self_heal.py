"""Derived state heals itself (issue 22 item 2) and store writes are all-or-nothing
(item 3): a corrupt file in any store of the state dir costs a rebuild and one warning
line naming the store, never a failed run or a different label; the judge cache keeps
what it can read and asks the rest again; no room while a store is written is one
`DiskFull` line and leaves the store as it was. Real flows (the session's Prefect test
server), the local judge on the sample; the openai judge over real HTTP to a local server."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from conftest import SAMPLE
from ragspan.tasks.judges.cache import JudgeCache
from ragspan.tasks.judges.openai_judge import OpenAIJudge, openai_spec
from ragspan.tasks.state import _heal as heal
from ragspan.tasks.state import _sqlite as sqlite_heal

from benchmarks._support.fake_openai_server import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[1]


def _flip(path: Path, n: int = 64) -> None:
    """Damage a file in place: n bytes from its middle inverted (size unchanged)."""
    blob = bytearray(path.read_bytes())
    mid = len(blob) // 2
    blob[mid:mid + n] = bytes(b ^ 0xFF for b in blob[mid:mid + n])
    path.write_bytes(bytes(blob))


def _labels(out: Path) -> list[tuple[str, str]]:
    d = pd.read_parquet(out / "diagnoses.parquet")
    return list(zip(d["claim_id"], d["label"]))


def _largest(files: list[Path]) -> Path:
    return max(files, key=lambda p: p.stat().st_size)


@pytest.mark.usefixtures("prefect_server")
def test_one_corrupt_file_in_any_store_costs_a_rebuild_and_one_line_never_a_label(state_dir, tmp_path, capfd):
    from ragspan.flows.evaluate import evaluate
    from ragspan.tasks.state._step_results import check_record
    from ragspan.tasks.state._stores import step_results_dir

    def run(name: str, **overrides: str) -> list[tuple[str, str]]:
        evaluate(data_dir=str(SAMPLE), run="baseline", out_dir=str(tmp_path / name), overrides=overrides)
        return _labels(tmp_path / name)

    clean = run("clean", **{"pipeline.reuse_answers": "false"})  # fills the step results too
    run("store")  # and the answer store
    capfd.readouterr()
    index = next((state_dir / "index").iterdir())
    segment = next((state_dir / "answers").glob("*/seg-*"))
    entry = next((state_dir / "inputs").glob("ws-*.pickle"))
    damage = {  # store (as the warning names it) → (the file damaged, what the warning names)
        "corpus index": (_largest([p for p in (index / "tantivy").iterdir() if p.is_file()]), index),
        "answer store segment": (segment / "diagnoses.parquet", segment),
        "validated-inputs cache entry": (entry, entry),
    }
    for path, _ in damage.values():
        _flip(path)
    assert run("damaged") == clean
    err = capfd.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 3, err
    for store, (path, named) in damage.items():
        assert f"warning: {store} {named} unreadable (" in err, err
        moved = [p for p in (state_dir / "damaged").iterdir() if p.name.startswith(store.replace(" ", "-"))]
        assert len(moved) == 1 and moved[0].name.endswith(named.name)  # moved aside, kept for a post-mortem
        assert named.exists() == (store != "answer store segment")  # rebuilt; the store gets a new segment
    assert heal.check_sealed(index) is None  # rebuilt whole
    # The answer store healed: the next run reuses every answer again, in silence.
    again = tmp_path / "again"
    metrics = evaluate(data_dir=str(SAMPLE), run="baseline", out_dir=str(again))
    assert metrics["judge"]["answers_reused"] == 38 and _labels(again) == clean
    assert "warning: " not in capfd.readouterr().err
    # Step results: one half-written by a killed run, one whose payload changed (still
    # valid JSON). Moved aside by the sweep; the steps run again; the same labels.
    truncated, changed = sorted((p for p in step_results_dir().iterdir() if not p.name.startswith(".")),
                                key=lambda p: p.stat().st_size)[-2:]
    truncated.write_bytes(truncated.read_bytes()[: truncated.stat().st_size // 2])
    text = changed.read_text()
    i = text.index("RAGSPAN-SUM") + 200
    changed.write_text(text[:i] + ("A" if text[i] != "A" else "B") + text[i + 1:])
    assert run("steps", **{"pipeline.reuse_answers": "false"}) == clean
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and err.startswith("warning: step result "), err
    assert "(and 1 more)" in err and len(list((state_dir / "damaged").glob("step-result-*"))) == 2, err
    assert check_record(truncated) is None and check_record(changed) is None  # written anew


def _params(url: str) -> SimpleNamespace:
    return SimpleNamespace(model="fake-model", base_url=url, backoff_base_s=0.01, backoff_max_s=0.02,
                           max_retries=1, timeout_s=5)


def test_a_damaged_judge_cache_keeps_its_readable_calls_and_asks_only_the_rest(tmp_path, capfd):
    """Paid answers are not rebuilt: integrity_check finds the damage, every readable row
    is kept, the lost calls go to the server again — exactly those, and counted."""
    path = tmp_path / "judge-cache.sqlite"
    claims = [f"The plan number {i} costs ${i} per month and includes {i * 10} GB of storage space." for i in range(60)]
    passages = [f"Plan number {i} costs ${i} per month, with {i * 10} GB of storage, billed monthly. " * 3
                for i in range(60)]
    with FakeOpenAIServer() as server:
        first = OpenAIJudge(openai_spec(_params(server.url)), cache=JudgeCache(path))
        verdicts = [first.judge(c, [p]) for c, p in zip(claims, passages)]
        first.cache.close()
        assert server.count == 60
        with sqlite3.connect(path) as conn:  # everything in the main file, no WAL left
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        pages = path.stat().st_size // 4096
        assert pages > 8
        blob = bytearray(path.read_bytes())
        start = 4096 * (pages // 2)  # one page of rows in the middle: a table's leaf
        blob[start:start + 4096] = os.urandom(4096)
        path.write_bytes(bytes(blob))
        assert sqlite_heal.problem_of(path) is not None
        sqlite_heal._CHECKED.discard(str(path.resolve()))  # as a new process would
        capfd.readouterr()
        again = OpenAIJudge(openai_spec(_params(server.url)), cache=JudgeCache(path))
        err = capfd.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"warning: judge cache {path} unreadable"), err
        kept = int(err.split("kept ")[1].split()[0])
        assert 0 < kept < 60, err
        assert sqlite_heal.problem_of(path) is None and len(again.cache) == kept
        assert [again.judge(c, [p]) for c, p in zip(claims, passages)] == verdicts
        assert server.count - 60 == 60 - kept == again.stats.calls  # only the lost ones, counted
        assert again.stats.cache_hits == kept


_NO_ROOM = textwrap.dedent("""
    import resource, signal, sys
    from pathlib import Path
    import pandas as pd
    from ragspan.tasks.errors import DiskFull
    from ragspan.tasks.inputs.load import load_workspace
    from ragspan.tasks.steps.corpus_search import build_index_dir
    ws = load_workspace(sys.argv[1], "baseline", 800, 100, 3)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[3]), resource.RLIM_INFINITY))
    try:
        build_index_dir(ws.chunks, ws.corpus, Path(sys.argv[2]))
    except DiskFull as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
""")


def test_no_room_while_building_the_index_is_one_line_and_leaves_nothing_half_built(tmp_path, state_dir):
    root = tmp_path / "index"
    env = {**os.environ, "RAGSPAN_HOME": str(tmp_path / "state")}
    proc = subprocess.run([sys.executable, "-c", _NO_ROOM, str(SAMPLE), str(root), "20000"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr.count("\n") == 1 and "file too large while writing corpus index" in proc.stderr
    assert "needs at least" in proc.stderr and "MB free there" in proc.stderr
    assert [p.name for p in root.iterdir()] == []  # no index, no .building-* left behind
    from ragspan.tasks.inputs.load import load_workspace
    from ragspan.tasks.steps.corpus_search import build_index_dir

    ws = load_workspace(SAMPLE, "baseline", 800, 100, 3)
    built = build_index_dir(ws.chunks, ws.corpus, root)  # with room: the same build succeeds
    assert [p.name for p in root.iterdir()] == [built.name] and heal.check_sealed(built) is None


_FULL_CACHE = textwrap.dedent("""
    import resource, signal, sys
    from ragspan.tasks.errors import DiskFull
    from ragspan.tasks.judges.cache import JudgeCache
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
    try:
        with JudgeCache(sys.argv[1]) as cache:
            cache.put("new", {"model": "m"}, {"v": "x" * 100_000})
    except DiskFull as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
""")


def test_a_judge_cache_without_room_is_disk_full_never_taken_for_damage(tmp_path):
    """Under a file-size limit SQLite reports only 'disk I/O error', even on open: that is
    no room, not a damaged file — the paid rows stay where they are."""
    path = tmp_path / "judge-cache.sqlite"
    with JudgeCache(path) as cache:
        for i in range(50):
            cache.put(f"k{i}", {"model": "m"}, {"v": "y" * 500})
    env = {**os.environ, "RAGSPAN_HOME": str(tmp_path / "state")}
    proc = subprocess.run([sys.executable, "-c", _FULL_CACHE, str(path)], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr.startswith(f"error: {path}: file too large while writing judge cache"), proc.stderr
    assert proc.stderr.count("\n") == 1 and "warning" not in proc.stderr
    assert not (tmp_path / "state" / "damaged").exists()
    with JudgeCache(path) as cache:
        assert len(cache) == 50 and cache.get("new") is None


def test_the_index_name_changes_with_the_text_between_chunks():
    """The index keeps each chunk's neighbouring text (the windows across chunk edges read
    it): an edit there alone, of the same length, is another index."""
    import pandas as pd
    from ragspan.tasks.steps.corpus_search import chunk_table_hash

    chunks = pd.DataFrame({"chunk_id": ["a", "b"], "doc_id": ["d", "d"], "char_start": [0, 9], "char_end": [5, 14]})
    before = pd.DataFrame({"doc_id": ["d"], "text": ["AAAA. xx BBBB."]})
    after = pd.DataFrame({"doc_id": ["d"], "text": ["AAAA. yy BBBB."]})  # chunk texts unchanged
    assert before["text"][0][0:5] == after["text"][0][0:5] and before["text"][0][9:14] == after["text"][0][9:14]
    assert chunk_table_hash(chunks, before) != chunk_table_hash(chunks, after)
    assert chunk_table_hash(chunks, before) == chunk_table_hash(chunks, before.copy())
