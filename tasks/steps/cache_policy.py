"""How every pipeline step becomes a Prefect task — one place for the cache settings.

Cache key = the task's source + a *content* fingerprint of every input. Prefect's
INPUTS policy hashes inputs by pickling them, and a DataFrame's pickle depends on its
memory layout, not only its content: a table that came out of the result store hashes
differently from the identical table built in memory, so the step after a cached step
would never be cached. Here DataFrames are hashed by value (pandas' own
`hash_pandas_object`, plus columns and dtypes). TASK_SOURCE sees only the task's own
body, so every step also takes `code` (tasks.config.code_version()) and its judge
spec/thresholds as inputs. A judging step's `runtime` input (tasks.judges.base.JudgeRuntime:
the verdict-cache and judge-cache paths, worker processes) is left out of the key
(RUNTIME_INPUTS): it changes no output, and a path under the state dir in the key would
make an unchanged re-run elsewhere, or with the verdict cache off, miss. Results are
persisted under the ragspan state dir
(PREFECT_RESULTS_LOCAL_STORAGE_PATH, set by flows.runtime), never inside a DVC out, with
a checksum (tasks/state/_step_results.py).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa
from pandas.arrays import ArrowStringArray
from prefect import task
from prefect.cache_policies import TASK_SOURCE, CachePolicy
from prefect.serializers import PickleSerializer
from prefect.utilities.hashing import hash_objects
from prefect.utilities.importtools import from_qualified_name
from pydantic import Field
from ragspan.tasks.state import SEALED_PICKLE, sealed_bytes, unsealed_result

F = TypeVar("F", bound=Callable)


class CheckedPickle(PickleSerializer):
    """Prefect's cloudpickle serializer (base64 text) behind a checksum header (the state room's
    seal): a result whose bytes changed on disk is a miss, never a different table."""

    type: str = Field(default=SEALED_PICKLE, frozen=True)

    def dumps(self, obj: Any) -> bytes:
        # One base64 line, not Prefect's `encodebytes` (a Python loop of 57-byte lines, and
        # a JSON escape per line in the record). Prefect's `loads` (`decodebytes`) reads both.
        return sealed_bytes(base64.b64encode(from_qualified_name(self.picklelib).dumps(obj)))

    def loads(self, blob: bytes) -> Any:
        return super().loads(unsealed_result(blob))


def fingerprint(value: Any) -> str:
    """A process-independent content hash of a task input."""
    if isinstance(value, pd.DataFrame):
        return _frame_fingerprint(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return hashlib.sha256(json.dumps(dataclasses.asdict(value), sort_keys=True, default=str).encode()).hexdigest()
    if value is None or isinstance(value, (str, int, float, bool)):
        return hashlib.sha256(repr(value).encode()).hexdigest()
    return hash_objects(value, raise_on_failure=True) or ""


# A shard's tables go to several steps each (its passages to four, its claims to five): a
# table is hashed once while it lives, not once per step that takes it — a table is never
# changed after it is made (steps are pure: each returns new tables and leaves its inputs
# as given; tests/test_step_keys.py checks every input of a whole run after it ran). By
# identity, held weakly: a table that is gone leaves the memo.
_frame_digests: dict[int, tuple[weakref.ref, str]] = {}
_frame_lock = threading.Lock()  # shards' steps run on the flow's worker threads


def _frame_fingerprint(value: pd.DataFrame) -> str:
    key = id(value)
    with _frame_lock:
        known = _frame_digests.get(key)
    if known is not None and known[0]() is value:
        return known[1]
    digest = frame_content_hash(value)
    ref = weakref.ref(value, lambda _, key=key: _forget_frame(key))
    with _frame_lock:
        _frame_digests[key] = (ref, digest)
    return digest


def _forget_frame(key: int) -> None:
    with _frame_lock:
        known = _frame_digests.get(key)
        if known is not None and known[0]() is None:
            del _frame_digests[key]


def frame_content_hash(value: pd.DataFrame) -> str:
    """A DataFrame's content hash, computed afresh: columns, dtypes, index and values. A
    column of Arrow strings is hashed as its buffers (each slot's bytes, its length and
    whether it is missing): pandas' hash_pandas_object turns it into Python objects first,
    ~1.8 s of a cold run's step keys at 100k chunks × 10k answers."""
    h = hashlib.sha256(json.dumps([list(map(str, value.columns)), list(map(str, value.dtypes))]).encode())
    if isinstance(value.index, pd.RangeIndex):
        h.update(repr((value.index.start, value.index.stop, value.index.step)).encode())
    else:
        h.update(pd.util.hash_pandas_object(value.index, index=False).to_numpy().tobytes())
    for name in value.columns:
        col = value[name]
        if col.dtype == object:  # lists (bring-your-own claims), None: hash their JSON
            col = col.map(lambda v: json.dumps(v, sort_keys=True, default=str, ensure_ascii=False))
        elif isinstance(col.array, ArrowStringArray):
            _update_with_strings(h, col.array.__arrow_array__())
            continue
        h.update(pd.util.hash_pandas_object(col, index=False).to_numpy().tobytes())
    return h.hexdigest()


def _update_with_strings(h: Any, column: pa.ChunkedArray) -> None:
    """Feed `h` a string column, chunk by chunk: per slot its byte length and whether it is
    missing, then every slot's bytes — which say the column's values exactly (a missing
    slot's bytes, if any, are hashed too: equal columns may then differ, a miss, never the
    reverse). Chunk boundaries are not hashed: the same values in other chunks hash alike."""
    lengths, missing, data = [], [], []
    for chunk in column.chunks:
        offsets_type = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
        buffers = chunk.buffers()
        offsets = np.frombuffer(buffers[1], dtype=offsets_type)[chunk.offset: chunk.offset + len(chunk) + 1] \
            if len(chunk) else np.zeros(1, dtype=offsets_type)
        lengths.append(np.diff(offsets).astype(np.int64))
        missing.append(chunk.is_null().to_numpy(zero_copy_only=False))
        if len(chunk) and buffers[2] is not None:
            data.append(memoryview(buffers[2])[int(offsets[0]):int(offsets[-1])])
    h.update(b"strings")
    h.update(np.concatenate(lengths).tobytes() if lengths else b"")
    h.update(np.packbits(np.concatenate(missing)).tobytes() if missing else b"")
    for piece in data:
        h.update(piece)


# Inputs that say how a step runs, not what it computes: never in a cache key.
RUNTIME_INPUTS: frozenset[str] = frozenset({"runtime"})


@dataclasses.dataclass
class ContentInputs(CachePolicy):
    """Prefect cache policy: a key from the *content* of every input (`fingerprint`),
    not from its pickle, leaving out RUNTIME_INPUTS — composed with TASK_SOURCE in
    STEP_CACHE_POLICY."""

    def compute_key(self, task_ctx: Any, inputs: dict[str, Any], flow_parameters: dict[str, Any],
                    **kwargs: Any) -> str | None:
        if not inputs:
            return None
        h = hashlib.sha256()
        for name in sorted(set(inputs) - RUNTIME_INPUTS):
            h.update(name.encode())
            h.update(fingerprint(inputs[name]).encode())
        return h.hexdigest()


# The step's own source + the content of everything it is given (tables, judge spec,
# thresholds, `code` = tasks.config.code_version()).
STEP_CACHE_POLICY = TASK_SOURCE + ContentInputs()


def step_task(name: str) -> Callable[[F], F]:
    return task(  # type: ignore[return-value]
        name=name,
        cache_policy=STEP_CACHE_POLICY,
        persist_result=True,
        # Not also kept in memory: Prefect's result store holds the last 1000 results it
        # persisted (an LRU of records), so every step table of ~90 shards stayed in the
        # flow's memory — a run's memory grew with its answers (docs/decisions.md #54).
        # A cache hit reads the result from disk, as it does in a new process.
        cache_result_in_memory=False,
        result_serializer=CheckedPickle(),  # a changed result on disk is a miss, not a different table
        log_prints=False,
    )
