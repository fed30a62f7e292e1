"""File md5s remembered by where the file sits: a file that did not move is not read again.

Every run hashed its input files twice (the validated-inputs cache key, then the data
directory's DVC md5 in the manifest: ~70 MB twice at 100k chunks × 10k answers, plus any
other file in the data directory). Here a file's md5 is kept with its stat fingerprint —
size, mtime_ns, ctime_ns, inode, device — and given back while all five are unchanged;
any write, replace, copy or `touch` changes one of them (ctime cannot be set back by a
user), so the file is read and hashed again. Kept in `<state>/digests.json` (the
DIGESTS_KEEP most recently hashed files), the store layer's `digests` store
(tasks/state/_store.py): plain JSON, written aside and renamed; an unreadable file is an empty
cache, written anew; a failed write (no room: DiskFull, a read-only state dir) costs only a
re-hash. Damage inside the state dir's own stores is not this module's business: those are
sealed and checked byte for byte (tasks/state/_heal.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from ._store import REGISTRY, DirStore, dir_store

DIGESTS_FILE = REGISTRY["digests"].pattern  # one file: the store's only entry
DIGESTS_KEEP = 20_000
_LOCK = threading.Lock()


def _stamp(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _read(store: DirStore) -> dict[str, list]:
    """The remembered md5s; an unreadable file reads as none, in silence (it is rewritten)."""
    loaded = store.read_file(DIGESTS_FILE, lambda b: json.loads(b.decode("utf-8")), None, mark=False)
    return loaded if isinstance(loaded, dict) else {}


def _write(store: DirStore, entries: dict[str, list]) -> None:
    """Aside, then renamed; a failure (read-only state dir, no room) costs only a re-hash."""
    try:
        store.write_file(DIGESTS_FILE, json.dumps(entries).encode("utf-8"))
    except OSError:  # DiskFull included: the previous file as it was
        return


def _md5_of_bytes(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "md5").hexdigest()


def file_md5s(paths: list[Path]) -> list[str]:
    """The md5 (hex) of each file's bytes, in order; only files whose stat fingerprint
    changed since they were last hashed are read."""
    store = dir_store("digests")
    with _LOCK:
        entries = _read(store)
        out, changed = [], False
        for path in paths:
            key = str(Path(path).resolve())
            stamp = _stamp(os.stat(path))
            known = entries.get(key)
            if isinstance(known, list) and len(known) == 2 and known[0] == stamp:
                out.append(known[1])
                continue
            out.append(_md5_of_bytes(Path(path)))
            entries.pop(key, None)  # re-inserted last: the dict's order is recency
            entries[key] = [stamp, out[-1]]
            changed = True
        if changed:
            _write(store, dict(list(entries.items())[-DIGESTS_KEEP:]))
    return out
