"""Step results (Prefect's persisted step cache) carry a checksum: a result whose bytes
changed on disk is never unpickled into a different table. Prefect treats a record it
cannot read as a cache miss — the step runs again and rewrites it — so a damaged result
costs only that step's time; this serializer makes a changed payload such a record, with
one warning line."""

from __future__ import annotations

from typing import Any

from prefect.serializers import PickleSerializer
from pydantic import Field
from ragspan.tasks.io import heal

STORE = "step result"


class CheckedPickle(PickleSerializer):
    """Prefect's cloudpickle serializer (base64 text) behind an md5 header (heal.sealed_bytes)."""

    type: str = Field(default="ragspan-checked-pickle", frozen=True)

    def dumps(self, obj: Any) -> bytes:
        return heal.sealed_bytes(super().dumps(obj))

    def loads(self, blob: bytes) -> Any:
        try:
            payload = heal.unsealed(blob)
        except ValueError as exc:
            from ragspan.tasks.io.state import step_results_dir

            heal.warn(STORE, step_results_dir(), f"a stored result {exc}",
                      "that step runs again and its result is written anew")
            raise
        return super().loads(payload)
