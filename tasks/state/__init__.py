"""The state room: everything ragspan keeps between runs, and how it is kept.

The ground floor of ragspan (docs/architecture.md): it imports nothing of ragspan but the
error tree, and nothing heavy at import time (the command line imports it before Prefect,
pandas or Arrow). Every other room reaches it through this face only; the modules behind it
are private:

    _dirs          where the state dir is (RAGSPAN_HOME), where damaged stores go
    _store         the one store layer (DirStore, SqliteStore), the registry of every store,
                   what counts as no room
    _sqlite        SQLite damage: found once per process, salvaged into a fresh file
    _heal          seals (checksum headers and sums files), moving a damaged store aside, the warning
    _stores        the state dir's stores by the registry: stats, clear, pruning, sizes
    _locks         the workspace lock (one writer of a DVC workspace at a time)
    _atomic        atomic directory writes and the output lock
    _digests       file md5s remembered by stat fingerprint
    _mapped        memory-mapped files under Arrow buffers, pages handed back
    _step_results  the seal of Prefect's step results and the sweep of new records
    _workers       worker-process pools that exit with their parent

Stores whose schema belongs to another room (the judge caches) register how they open
with `register_sqlite` when their module is imported.
"""

from ._atomic import output_lock, room_for, write_atomic_dir, write_parquet_pieces
from ._digests import DIGESTS_FILE, file_md5s
from ._dirs import damaged_dir, state_dir, state_path
from ._heal import check_sealed, seal, sealed_bytes
from ._locks import file_lock, workspace_lock
from ._mapped import mapped_buffer, release_free_heap, release_mapped_pages
from ._step_results import SEALED_PICKLE, check_record, recording_run, sweep, unsealed_result
from ._store import (
    REGISTRY,
    DirStore,
    Entry,
    Registered,
    SqliteStore,
    dir_store,
    discard,
    no_room,
    register_sqlite,
    registered,
    sqlite_store,
    store_path,
    touch,
)
from ._stores import (
    CACHES,
    KEPT,
    TITLES,
    clear,
    human,
    mark_used,
    parse_size,
    prune,
    prune_after_run,
    stats,
    step_results_dir,
    store_paths,
)
from ._workers import pid_alive, spawn_pool

__all__ = [
    "CACHES",
    "DIGESTS_FILE",
    "KEPT",
    "REGISTRY",
    "SEALED_PICKLE",
    "TITLES",
    "DirStore",
    "Entry",
    "Registered",
    "SqliteStore",
    "check_record",
    "check_sealed",
    "clear",
    "damaged_dir",
    "dir_store",
    "discard",
    "file_lock",
    "file_md5s",
    "human",
    "mapped_buffer",
    "mark_used",
    "no_room",
    "output_lock",
    "parse_size",
    "pid_alive",
    "prune",
    "prune_after_run",
    "recording_run",
    "register_sqlite",
    "registered",
    "release_free_heap",
    "release_mapped_pages",
    "room_for",
    "seal",
    "sealed_bytes",
    "spawn_pool",
    "sqlite_store",
    "state_dir",
    "state_path",
    "stats",
    "step_results_dir",
    "store_path",
    "store_paths",
    "sweep",
    "touch",
    "unsealed_result",
    "workspace_lock",
    "write_atomic_dir",
    "write_parquet_pieces",
]
