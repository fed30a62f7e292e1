"""Files read through memory maps whose resident pages can be handed back.

The corpus store's texts (tasks/inputs/load/corpus_store.py) and an index's chunk rows
(tasks/steps/index_build.py) are gigabytes at millions of chunks, and are read in place:
zero-copy Arrow arrays over mapped pages. Every page a process has touched stays in its
resident set until it unmaps the file — a cold index build reads every text, so at 10M
chunks it carried 5 GB of clean file pages in its RSS (measured: 8.8 GB peak RSS for
4.2 GB of heap). Those pages are the kernel's page cache either way; only the accounting
differs, but RSS is what a machine's limits and a user's monitoring see.

So such files are mapped here (Python's mmap, shared and read-only, which can `madvise`),
and a step that streams through one calls `release_mapped_pages()` between batches:
MADV_DONTNEED drops the pages from this process's page tables; they stay in the page
cache, and a later read of the same bytes faults them back in from there — the contents
never change (a read-only shared mapping of a file nobody rewrites: the stores write a
new entry aside and rename it). Safe beside threads reading the same map for the same
reason.
"""

from __future__ import annotations

import ctypes
import mmap
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


# Every live map of this process; a map lives as long as an Arrow buffer over it does.
_maps: weakref.WeakSet[mmap.mmap] = weakref.WeakSet()


def mapped_buffer(path: Path) -> pa.Buffer:
    """The file's bytes as an Arrow buffer over a read-only shared map (an empty file: an
    empty buffer; a file cannot be mapped at length 0)."""
    import pyarrow as pa  # here: the command line imports the state room before anything heavy

    with open(path, "rb") as f:
        if not f.seek(0, 2):
            return pa.py_buffer(b"")
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # the map outlives the descriptor
    _maps.add(m)
    return pa.py_buffer(m)


def release_mapped_pages() -> None:
    """Drop every mapped page from this process's resident set (they stay cached)."""
    for m in list(_maps):
        try:
            m.madvise(mmap.MADV_DONTNEED)
        except (OSError, ValueError):  # closed meanwhile: nothing resident
            pass


def release_free_heap() -> None:
    """Hand the allocator's free pages back to the system (glibc's malloc_trim, which also
    releases free pages inside the heap). A step that made and dropped gigabytes of small
    objects — a load's batches, an index build's texts — otherwise leaves them resident:
    the freed chunks stay in the heap below whatever was allocated after them. Not glibc:
    nothing to do."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass

