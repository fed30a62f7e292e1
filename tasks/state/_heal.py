"""Derived state heals itself: every store under the state dir is checked when it is
opened, and one that cannot be read is moved aside (`<state>/damaged/`) and rebuilt,
with one warning line naming the store and what happens instead. These are the store
layer's primitives (tasks/state/_store.py builds every store on them); a store's module uses
the layer, not these directly.

The checks are cheap and content-based, so a flipped byte is caught as well as a
truncated file (a file's checksum is read again only once it was written since its last
check: `.checked.json` keeps its size, mtime, ctime and inode): a directory store (a corpus index, an answer-store segment) carries
`sums.json` — every file's size and checksum, written last, inside the directory that is
then renamed into place — and a file store (a validated input, a step result) starts with
a header holding its payload's checksum. The checksum is CRC-32 (zlib, ~7 GB/s here; md5
ran at ~0.9 GB/s and was ~1 CPU-s of a cold run at 100k chunks, all of it spent on damage
that CRC-32 catches as surely: a flipped bit, a truncated or overwritten stretch — these
seals guard against accidents, not adversaries). Seals written with md5 (`RAGSPAN-SUM1`,
32 hex digits in sums.json) are still read. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
import zlib
from pathlib import Path

from ._dirs import damaged_dir

SUMS_FILE = "sums.json"
CHECKED_FILE = ".checked.json"  # each file's stat when its checksum was last found right
KEEP_DAMAGED = 5  # moved-aside stores kept for a post-mortem; older ones are deleted
_SKIP = (SUMS_FILE, CHECKED_FILE, ".tantivy-meta.lock", ".tantivy-writer.lock")  # lock files change on open
_MAGIC = b"RAGSPAN-SUM2 "  # a file store's header: magic + the payload's CRC-32 (8 hex digits) + newline
_HEAD = len(_MAGIC) + 9
_MD5_MAGIC = b"RAGSPAN-SUM1 "  # the header before CRC-32: magic + hex md5 of the payload + newline
_MD5_HEAD = len(_MD5_MAGIC) + 33
_CRC = "crc32:"  # a sums.json checksum's prefix (none: an md5, as written before)


def _checksum(path: Path) -> str:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return f"{_CRC}{crc:08x}"


def _matches(path: Path, digest: str) -> bool:
    if digest.startswith(_CRC):
        return _checksum(path) == digest
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "md5").hexdigest() == digest


def _files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.name not in _SKIP)


def seal(directory: Path) -> None:
    """Write `sums.json`: every file's size and checksum (call last, before the rename)."""
    sums = {p.relative_to(directory).as_posix(): [p.stat().st_size, _checksum(p)] for p in _files(directory)}
    (directory / SUMS_FILE).write_text(json.dumps(sums, sort_keys=True))
    _note_checked(directory, sums)


def _stamp(path: Path) -> list[int]:
    """What any write to a file changes: size, mtime, ctime (which no utime can set back), inode."""
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _note_checked(directory: Path, sums: dict) -> None:
    """Remember each file's stamp as of a content check that found it right: its checksum is not
    read again until the file is written (a corpus store entry or an index is gigabytes at
    millions of chunks: a checksum on every open cost seconds of every run). A failure to note
    costs only a full check next time."""
    try:
        stamps = {rel: _stamp(directory / rel) for rel in sums}
        tmp = directory / f"{CHECKED_FILE}.{os.getpid()}"
        tmp.write_text(json.dumps(stamps, sort_keys=True))
        os.replace(tmp, directory / CHECKED_FILE)
    except OSError:
        return


def _unchanged_since_checked(directory: Path, sums: dict) -> bool:
    try:
        stamps = json.loads((directory / CHECKED_FILE).read_text())
        return isinstance(stamps, dict) and set(stamps) == set(sums) and all(
            stamps[rel] == _stamp(directory / rel) for rel in sums)
    except (OSError, ValueError, TypeError):
        return False


def check_sealed(directory: Path) -> str | None:
    """None when every file `sums.json` lists is there with its size and checksum; else what
    is wrong (sizes are checked before any content is read)."""
    try:
        sums = json.loads((directory / SUMS_FILE).read_text())
        if not isinstance(sums, dict) or not sums:
            return f"{SUMS_FILE} is empty"
        for rel, (size, _) in sums.items():
            actual = (directory / rel).stat().st_size
            if actual != size:
                return f"{rel} has {actual} bytes, not {size}"
        if _unchanged_since_checked(directory, sums):
            return None
        for rel, (_, digest) in sums.items():
            if not _matches(directory / rel, digest):
                return f"{rel} does not match its checksum"
        _note_checked(directory, sums)
    except FileNotFoundError as exc:
        return f"{Path(exc.filename or '?').name} is missing"
    except (OSError, ValueError, TypeError) as exc:
        return f"{SUMS_FILE} unreadable ({type(exc).__name__})"
    return None


def sealed_bytes(payload: bytes) -> bytes:
    """A file store's content: header + payload."""
    return b"%s%08x\n%s" % (_MAGIC, zlib.crc32(payload), payload)


def unsealed(blob: bytes) -> bytes:
    """The payload of `sealed_bytes` (or of a header written with md5), or ValueError when
    the header or checksum is wrong."""
    if blob.startswith(_MAGIC) and len(blob) >= _HEAD and blob[_HEAD - 1:_HEAD] == b"\n":
        payload = blob[_HEAD:]
        if b"%08x" % zlib.crc32(payload) != blob[len(_MAGIC):_HEAD - 1]:
            raise ValueError("does not match its checksum")
        return payload
    if blob.startswith(_MD5_MAGIC) and len(blob) >= _MD5_HEAD:
        payload = blob[_MD5_HEAD:]
        if hashlib.md5(payload).hexdigest().encode() != blob[len(_MD5_MAGIC):_MD5_HEAD - 1]:
            raise ValueError("does not match its checksum")
        return payload
    raise ValueError("no checksum header")


def move_aside(path: Path, store: str) -> Path | None:
    """Rename `path` into the state dir's `damaged/` (a sibling `.damaged-*` name on
    another filesystem); None when it is already gone (another process moved it)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = damaged_dir() / f"{store.replace(' ', '-')}-{stamp}-{os.getpid()}-{path.name}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
    except FileNotFoundError:
        return None
    except OSError:  # another filesystem, or no room for the directory entry
        target = path.with_name(f".damaged-{stamp}-{os.getpid()}-{path.name}")
        try:
            os.replace(path, target)
        except FileNotFoundError:
            return None
    _keep_recent(target.parent)
    return target


def _keep_recent(where: Path) -> None:
    if where != damaged_dir():
        return
    try:
        moved = sorted(where.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return
    for old in moved[KEEP_DAMAGED:]:
        if old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)


def warn(store: str, path: Path, problem: str, action: str) -> None:
    """The one line a healed store costs: which store, what was wrong, what happens now."""
    print(f"warning: {store} {path} unreadable ({problem}): {action}", file=sys.stderr, flush=True)


def heal(path: Path, store: str, problem: str, action: str) -> None:
    """Move the unreadable `path` aside and say so; the caller rebuilds it."""
    moved = move_aside(path, store)
    where = f"moved aside to {moved}" if moved else "already moved aside"
    warn(store, path, problem, f"{where}; {action}")


def remove_leftovers(where: Path, pattern: str, older_than_s: float = 3600.0) -> None:
    """Delete what killed writers left behind (their temp files and directories): only
    older ones, since a live writer beside this run may still be filling its own."""
    now = time.time()
    for p in where.glob(pattern) if where.is_dir() else ():
        try:
            if now - p.stat().st_mtime < older_than_s:
                continue
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
        except FileNotFoundError:
            pass
