"""The store layer (tasks/state/_store.py) on real files: atomic writes, a damaged entry healed
with one warning line, keep-newest and LRU pruning, stats; every registered store listed
by `ragspan cache stats --json` after a run of the sample; and the chaos case — no room
(a file-size limit in a subprocess: writes fail with EFBIG, as with ENOSPC) while each
store writes leaves the store as it was, the verdict cache included."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import SAMPLE
from ragspan.tasks.errors import DiskFull
from ragspan.tasks.state import _heal as heal
from ragspan.tasks.state import _store as store
from ragspan.tasks.state._store import REGISTRY, DirStore, dir_store, sqlite_store


def _fingerprint(root: Path) -> dict[str, str]:
    """Every file under `root` (dot-names included) with its md5: a store as it is."""
    if root.is_file():
        return {root.name: hashlib.md5(root.read_bytes()).hexdigest()}
    return {p.relative_to(root).as_posix(): hashlib.md5(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _fill(files: dict[str, bytes]):
    def fill(tmp: Path) -> None:
        for name, blob in files.items():
            (tmp / name).write_bytes(blob)
    return fill


# -- the directory store ---------------------------------------------------------------------------


def test_a_write_appears_whole_or_not_at_all(tmp_path, state_dir):
    s = DirStore(tmp_path / "s", "test store")
    first = s.write_dir("a", _fill({"x.bin": b"x" * 100, "y.bin": b"y"}))
    assert heal.check_sealed(first) is None and sorted(p.name for p in s.names()) == ["a"]

    def half_then_fail(tmp: Path) -> None:
        (tmp / "x.bin").write_bytes(b"new")
        raise RuntimeError("killed midway")

    with pytest.raises(RuntimeError):
        s.write_dir("a", half_then_fail)
    assert (first / "x.bin").read_bytes() == b"x" * 100  # the previous entry as it was
    assert [p.name for p in s.root.iterdir()] == ["a"]  # no .tmp-* left behind
    s.write_dir("a", _fill({"x.bin": b"z"}))  # replaced whole
    assert sorted(p.name for p in first.iterdir() if p.name != heal.CHECKED_FILE) == [heal.SUMS_FILE, "x.bin"]

    files = DirStore(tmp_path / "f", "test file store")
    files.write_file("e.bin", b"payload")
    assert files.read_file("e.bin", bytes, "again") == b"payload"
    assert (files.root / "e.bin").read_bytes() != b"payload"  # behind its checksum header
    # a killed writer's leftover, older than an hour, goes with the next write
    old = files.root / ".tmp-e.bin-1-1"
    old.write_bytes(b"half")
    os.utime(old, (time.time() - 7200,) * 2)
    files.write_file("f.bin", b"other")
    assert sorted(p.name for p in files.root.iterdir()) == ["e.bin", "f.bin"]


def test_a_damaged_entry_is_moved_aside_with_one_warning_line(tmp_path, state_dir, capfd):
    s = DirStore(tmp_path / "s", "test store")
    entry = s.write_dir("a", _fill({"x.bin": b"x" * 100}))
    (entry / "x.bin").write_bytes(b"y" * 100)  # same size, other bytes
    capfd.readouterr()
    assert s.checked_dir("a", "building it again") is None
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"warning: test store {entry} unreadable ("), err
    assert "building it again" in err and not entry.exists()
    assert next(p.name for p in (state_dir / "damaged").iterdir()).startswith("test-store-")

    f = DirStore(tmp_path / "f", "test file store")
    path = f.write_file("e.bin", b"payload")
    path.write_bytes(path.read_bytes()[:-2])  # truncated
    assert f.read_file("e.bin", bytes, "reading it again") is None
    assert "warning: test file store" in capfd.readouterr().err and not path.exists()
    # a value its parser refuses is damage too; with no action it reads as missing, in silence
    f.write_file("j.json", b"{not json")
    assert f.read_file("j.json", json.loads, None) is None and capfd.readouterr().err == ""


def test_keep_newest_and_prune_go_by_last_use(tmp_path, state_dir):
    s = DirStore(tmp_path / "s", "test store", keep=2)
    for i, name in enumerate(("a", "b")):
        path = s.write_dir(name, _fill({"x": b"x" * 10}))
        os.utime(path, (time.time() - 100 + i,) * 2)
    assert s.checked_dir("a", "again") is not None  # a read is a use: "a" is now the newest
    s.write_dir("c", _fill({"x": b"x"}))
    assert [p.name for p in s.names()] == ["a", "c"]  # "b", least recently used, went

    from ragspan.tasks.state import _stores as state

    idx = dir_store("indexes")
    for i, name in enumerate(("old", "mid", "new")):
        path = idx.write_dir(name, _fill({"x.bin": b"x" * 5000}))
        os.utime(path, (time.time() - (3 - i) * 86400,) * 2)
    removed = state.prune(max_bytes=state.total_bytes() - 4000)  # one index too many
    assert removed["indexes"]["entries"] == 1 and [p.name for p in idx.names()] == ["mid", "new"]
    removed = state.prune(max_age_s=1.5 * 86400)
    assert removed["indexes"]["entries"] == 1 and [p.name for p in idx.names()] == ["new"]


def test_stats_of_every_kind_of_store(tmp_path, state_dir):
    from ragspan.tasks.state import _stores as state

    dir_store("reports").write_dir("k", _fill({"a": b"a" * 1000}))
    dir_store("digests").write_file("digests.json", b"{}")
    (state_dir / "spill" / f"{os.getpid()}-1").mkdir(parents=True)  # this process: alive
    (state_dir / "spill" / "999999999-1").mkdir()  # a process that cannot exist: gone
    verdicts = sqlite_store("verdict_cache")
    conn = verdicts.connect()
    today = int(time.time() // 86400)
    conn.executemany("INSERT INTO verdicts VALUES (?,?,?,?,?)",
                     [(bytes([i]), "[]", None, 1, today - i % 2) for i in range(10)])
    conn.close()
    got = state.stats()
    assert set(got) == set(REGISTRY)
    assert got["reports"]["entries"] == 1 and got["reports"]["bytes"] > 1000
    assert got["digests"]["entries"] == 1 and got["digests"]["bytes"] == 2
    assert got["spill"]["entries"] == 2 and got["verdict_cache"]["entries"] == 2  # two days
    assert [e.path.name for e in state.entries("spill")] == ["999999999-1"]  # only a gone process's
    cleared = state.clear(("spill", "verdict_cache", "reports", "digests"))
    assert cleared["spill"]["entries"] == 1 and (state_dir / "spill" / f"{os.getpid()}-1").is_dir()
    assert cleared["verdict_cache"]["entries"] == 2 and cleared["reports"]["entries"] == 1
    after = state.stats()
    assert after["verdict_cache"]["entries"] == after["reports"]["entries"] == after["digests"]["entries"] == 0


# -- the SQLite store ------------------------------------------------------------------------------


def test_sqlite_full_is_disk_full_and_the_rows_stay(tmp_path, state_dir):
    """SQLITE_FULL ("database or disk is full", here from max_page_count) is no room: the
    transaction is rolled back, never taken for damage."""
    verdicts = sqlite_store("verdict_cache", tmp_path / "v.sqlite")
    conn = verdicts.connect()
    conn.executemany("INSERT INTO verdicts VALUES (?,?,?,?,?)", [(bytes([i]), "[]", None, 1, 1) for i in range(5)])
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 1}")
    with pytest.raises(DiskFull, match="verdict cache"), verdicts.writing():
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("INSERT INTO verdicts VALUES (?,?,?,?,?)",
                             [(b"big" + bytes([i]), "x" * 5000, None, 1, 1) for i in range(50)])
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
    conn.close()
    assert len(verdicts.entries()) == 1 and not (state_dir / "damaged").exists()
    with sqlite3.connect(tmp_path / "v.sqlite") as c:
        assert c.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0] == 5


def test_a_damaged_verdict_cache_is_started_anew(tmp_path, state_dir, capfd):
    from ragspan.tasks.state import _sqlite as sqlite_heal

    path = tmp_path / "v.sqlite"
    path.write_bytes(b"not a database at all" * 500)
    sqlite_heal._CHECKED.discard(str(path.resolve()))
    capfd.readouterr()
    conn = sqlite_store("verdict_cache", path).connect()
    conn.close()
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"warning: verdict cache {path} unreadable"), err
    assert sqlite_heal.problem_of(path) is None and len(list((state_dir / "damaged").iterdir())) == 1


# -- every store in `cache stats --json` after a run -------------------------------------------------


@pytest.mark.usefixtures("prefect_server")
def test_every_registered_store_is_in_cache_stats_after_a_run(tmp_path, state_dir, capsys):
    from ragspan.flows.cli import cache as cache_cmd
    from ragspan.flows.evaluate import evaluate

    evaluate(data_dir=str(SAMPLE), run="baseline", out_dir=str(tmp_path / "out"))
    parser = argparse.ArgumentParser(prog="ragspan")
    cache_cmd.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["cache", "stats", "--json"])
    capsys.readouterr()
    assert args.func(args) == 0
    stats = json.loads(capsys.readouterr().out)
    for key, r in REGISTRY.items():
        assert key in stats, key
        assert stats[key]["pruned"] == r.pruned and stats[key]["title"] == r.title
    for key in ("verdict_cache", "answer_store", "inputs", "step_results", "indexes", "reports", "digests"):
        assert stats[key]["entries"] > 0, key  # written by the run (the local judge: no judge-cache row)
    assert stats["spill"]["entries"] == 0  # removed once merged
    args = parser.parse_args(["cache", "stats"])
    assert args.func(args) == 0
    text = capsys.readouterr().out
    for r in REGISTRY.values():
        assert r.title in text, r.title


# -- chaos: no room while each store writes ----------------------------------------------------------


_NO_ROOM_WRITES = textwrap.dedent("""
    import json, resource, signal, sys
    from pathlib import Path
    from ragspan.tasks.errors import DiskFull
    from ragspan.tasks.state._store import dir_store
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
    out = {}
    for key, root, kind in json.loads(sys.argv[1]):
        s = dir_store(key, Path(root))
        name = "digests.json" if key == "digests" else ("entry.pickle" if key == "inputs" else "entry")
        try:
            if kind == "files":
                s.write_file(name, b"n" * 50_000)
            else:
                s.write_dir(name, lambda tmp: (tmp / "big.bin").write_bytes(b"n" * 50_000))
            out[key] = "written"
        except DiskFull as exc:
            out[key] = f"DiskFull: {exc.what}"
    print(json.dumps(out))
""")

_LAYER_WRITTEN = ("answer_store", "inputs", "indexes", "reports", "digests", "spill")


def test_no_room_while_each_store_writes_leaves_it_as_it_was(tmp_path, state_dir):
    stores = []
    for key in _LAYER_WRITTEN:
        s = dir_store(key, tmp_path / key)
        if REGISTRY[key].kind == "files":
            s.write_file("digests.json" if key == "digests" else "entry.pickle", b"previous")
        else:
            s.write_dir("entry", _fill({"old.bin": b"previous" * 10}))
        stores.append((key, str(s.root), REGISTRY[key].kind))
    before = {key: _fingerprint(Path(root)) for key, root, _ in stores}
    env = {**os.environ, "RAGSPAN_HOME": str(state_dir)}
    proc = subprocess.run([sys.executable, "-c", _NO_ROOM_WRITES, json.dumps(stores)], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    for key, root, _ in stores:
        assert got[key].startswith("DiskFull"), (key, got[key])
        assert _fingerprint(Path(root)) == before[key], key  # as it was: no .tmp-*, nothing replaced
    assert not (state_dir / "damaged").exists()


_FULL_VERDICTS = textwrap.dedent("""
    import resource, signal, sys
    from pathlib import Path
    from ragspan.tasks.errors import DiskFull
    from ragspan.tasks.judges.verdict_cache import rows_with_cache

    def fresh(items):
        return [[("row", "y" * 3000, ()) for _ in ps] for _, ps, _, _ in items], \\
               [[0.9 for _ in ps] for _, ps, _, _ in items]

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), resource.RLIM_INFINITY))
    items = [(f"new claim {i}", [f"passage {i}-{j}" for j in range(5)], "q", False) for i in range(200)]
    try:
        rows_with_cache(items, fresh, "judge-1", Path(sys.argv[1]))
    except DiskFull as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
""")


def _judged(items):
    return ([[("row", "y" * 100, ()) for _ in ps] for _, ps, _, _ in items],
            [[0.9 for _ in ps] for _, ps, _, _ in items])


@pytest.mark.parametrize("limit", [4096, 200_000])  # no room even to open it / no room for the rows
def test_a_verdict_cache_hit_by_a_full_disk_keeps_its_file_and_rows(tmp_path, state_dir, limit):
    """The verdict cache used to take every error but a lock for damage — a full disk
    included — and move its file aside. Now: DiskFull, the file and every row kept."""
    from ragspan.tasks.judges.verdict_cache import rows_with_cache

    path = tmp_path / "verdict-cache.sqlite"
    items = [(f"claim {i}", [f"passage {i}-{j}" for j in range(3)], "q", False) for i in range(100)]
    rows_with_cache(items, _judged, "judge-1", path)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rows = sorted(conn.execute("SELECT key, row FROM verdicts").fetchall())
    conn.close()
    assert len(rows) == 300 and path.stat().st_size < limit or limit == 4096
    env = {**os.environ, "RAGSPAN_HOME": str(state_dir)}
    proc = subprocess.run([sys.executable, "-c", _FULL_VERDICTS, str(path), str(limit)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr.startswith(f"error: {path}: file too large while writing verdict cache"), proc.stderr
    assert proc.stderr.count("\n") == 1 and "warning" not in proc.stderr
    assert not (state_dir / "damaged").exists() and path.is_file()
    with sqlite3.connect(path) as conn:
        assert sorted(conn.execute("SELECT key, row FROM verdicts").fetchall()) == rows
    conn.close()
    # and with room again, the same cache serves every pair it held without judging one
    got, judged, _ = rows_with_cache(items, _judged, "judge-1", path)
    assert judged == 0 and len(got) == 100


def test_the_registry_names_every_store_once():
    assert len({r.where for r in REGISTRY.values()}) == len(REGISTRY)
    assert {r.kind for r in REGISTRY.values()} <= {"sqlite", "dirs", "files"}
    for key in REGISTRY:
        assert isinstance(store.registered(key), store.DirStore | store.SqliteStore), key


def test_seals_catch_damage_and_seals_written_with_md5_are_still_read(tmp_path):
    """A file seal (CRC-32 header) refuses a flipped byte, a cut and a lost header; a header
    or sums.json written with md5 (before CRC-32) is read, and refused when it does not match."""
    payload = os.urandom(5000)
    blob = heal.sealed_bytes(payload)
    assert heal.unsealed(blob) == payload
    for damaged in (blob[:-1], blob[:10], blob[:40] + bytes([blob[40] ^ 1]) + blob[41:], payload):
        with pytest.raises(ValueError):
            heal.unsealed(damaged)
    old = b"RAGSPAN-SUM1 " + hashlib.md5(payload).hexdigest().encode() + b"\n" + payload
    assert heal.unsealed(old) == payload
    with pytest.raises(ValueError, match="checksum"):
        heal.unsealed(old[:-1] + bytes([old[-1] ^ 1]))
    d = tmp_path / "store"
    d.mkdir()
    (d / "x.bin").write_bytes(payload)
    heal.seal(d)
    assert heal.check_sealed(d) is None
    (d / "x.bin").write_bytes(payload[:-1] + bytes([payload[-1] ^ 1]))  # same size, written since
    assert "does not match its checksum" in heal.check_sealed(d)
    (d / "x.bin").write_bytes(payload)
    (d / heal.SUMS_FILE).write_text(json.dumps({"x.bin": [len(payload), hashlib.md5(payload).hexdigest()]}))
    (d / heal.CHECKED_FILE).unlink()
    assert heal.check_sealed(d) is None  # an md5 sums.json, as written before
    (d / "x.bin").write_bytes(bytes(len(payload)))
    assert "does not match its checksum" in heal.check_sealed(d)

