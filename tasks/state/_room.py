"""What counts as no room — the filesystem full, a quota used up, a file-size limit, as the OS,
SQLite or a native library (tantivy, pyarrow) says it — and `room_for`, which turns such a
failure inside a block into DiskFull naming the file and the store: one answer to a full
disk for every store (stop, keep the store as it was)."""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ragspan.tasks.errors import DiskFull

# No room for a file: the filesystem is full, a quota is used up, or a file-size limit.
NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)

def no_room(exc: BaseException, path: Path | None = None) -> int:
    """The errno of a failure for want of room, else 0. SQLite says so by its own codes
    (_sqlite_no_room); native libraries (tantivy, pyarrow) in a ValueError or
    RuntimeError carrying the OS's message rather than an OSError."""
    if isinstance(exc, sqlite3.Error):
        return _sqlite_no_room(exc, path or Path("."))
    if isinstance(exc, OSError):
        return exc.errno if exc.errno in NO_SPACE else 0
    text = str(exc)
    return next((code for code in NO_SPACE if os.strerror(code) in text), 0)


@contextmanager
def room_for(path: Path, where: Path, what: str, needed: Callable[[], int] | None = None) -> Iterator[None]:
    """A failure for want of room inside the block is DiskFull naming `path` and `what`
    (and what the write needs, when `needed` can tell); anything else passes through."""
    try:
        yield
    except DiskFull:
        raise
    except (OSError, ValueError, RuntimeError, sqlite3.Error) as exc:
        code = no_room(exc, path)
        if code:
            cause = exc if isinstance(exc, OSError) and exc.errno == code else OSError(code, os.strerror(code))
            raise DiskFull(path, where, cause, what, needed() if needed else 0) from exc
        raise


_SQLITE_FULL = 13
_SQLITE_IOERR = 10  # any I/O error (write, truncate, growing the -shm map, ...)


def _sqlite_no_room(exc: sqlite3.Error, path: Path) -> int:
    """The errno behind a failed SQLite write when it is for want of room, else 0. SQLite
    reports a full disk as SQLITE_FULL, but a file-size limit (EFBIG) only as an I/O
    error: that one counts when a limit is set or the filesystem has under 1 MB left."""
    import resource

    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF  # the primary code
    if code == _SQLITE_FULL:
        return errno.ENOSPC
    if code == _SQLITE_IOERR:
        if resource.getrlimit(resource.RLIMIT_FSIZE)[0] != resource.RLIM_INFINITY:
            return errno.EFBIG
        try:
            st = os.statvfs(path.parent)
        except OSError:
            return 0
        return errno.ENOSPC if st.f_bavail * st.f_frsize < 1_000_000 else 0
    return 0
