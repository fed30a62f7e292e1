"""Every error ragspan raises on purpose, with the exit code the CLI returns for it.

    RagspanError                      exit 1 unless a subclass says otherwise
    ├── UsageError                    2  bad input, settings or arguments: fix and re-run
    │   ├── ConfigError                  params.yaml missing, unreadable or invalid
    │   ├── InputError                   a data file: names the file, the row and the field
    │   ├── PromptError                  a prompt file lost a required part
    │   ├── QuestionsDiffer              compare: the two runs are over different questions
    │   ├── SideError                    compare: a side cannot be found or read
    │   ├── MissingRun                   aggregate: a run has no metrics yet
    │   └── NoServer                     serve/notify: no Prefect API to talk to
    ├── OutputBusy                    3  another process is writing the same results dir
    ├── DiskFull                      4  no space (or file-size limit) writing results or a store: previous kept
    ├── InitError                     1  a step of `ragspan init` failed
    └── StepFailed                    1  a pipeline step ended in a failed state

Each keeps the builtin base it had (ValueError, FileNotFoundError, RuntimeError; DiskFull
is the OSError it replaces), so library callers that caught those still do. The CLI
catches `RagspanError` once and prints `error: <message>` (with --verbose, its traceback
first); nothing else maps exceptions to exit codes.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


class RagspanError(Exception):
    exit_code: int = 1


class UsageError(RagspanError):
    exit_code = 2


class ConfigError(UsageError, ValueError):
    """params.yaml is missing, unreadable or invalid."""


class InputError(UsageError, ValueError):
    """Bad input: names the file, the 1-based row and the field."""

    def __init__(self, file: str | Path, row: int | None, field: str | None, message: str):
        self.file = str(file)
        self.row = row
        self.field = field
        self.message = message
        where = []
        if row is not None:
            where.append(f"row {row}")
        if field is not None:
            where.append(f"field '{field}'")
        prefix = f"{self.file}: " + (", ".join(where) + ": " if where else "")
        super().__init__(prefix + message)


class PromptError(UsageError, ValueError):
    """A prompt file is missing, malformed, or lost a required part."""


class QuestionsDiffer(UsageError, ValueError):
    """The two runs were not evaluated on the same questions."""


class SideError(UsageError, ValueError):
    """A side of the comparison cannot be found or read."""


class MissingRun(UsageError, FileNotFoundError):
    """A run named for aggregation has no metrics.json yet."""


class NoServer(UsageError, RuntimeError):
    """No Prefect API to talk to."""


class OutputBusy(RagspanError, RuntimeError):
    """Another ragspan process is writing the same results directory."""

    exit_code = 3


class DiskFull(RagspanError, OSError):
    """The filesystem is full (ENOSPC, EDQUOT) or a file-size limit was hit (EFBIG) while
    writing a results directory or a store of the state dir (`what`); nothing is left
    half-written: the previous results (or store) are left as they were. `needed`: bytes
    the write needs at least (0: unknown)."""

    exit_code = 4

    def __init__(self, path: str | Path, out_dir: str | Path, cause: OSError, what: str = "results",
                 needed: int = 0, free: int | None = None):
        self.path, self.out_dir, self.what, self.needed = str(path), str(out_dir), what, needed
        self.free = _free(Path(self.path)) if free is None else free  # measured once: a copy says the same
        reason = os.strerror(cause.errno) if cause.errno else str(cause)  # pyarrow's strerror is long
        fix = "raise the file-size limit (ulimit -f)" if cause.errno == errno.EFBIG else "free space"
        kept = (f"the previous results in {self.out_dir} are unchanged" if what == "results"
                else f"the {what} in {self.out_dir} is as it was")
        super().__init__(f"{self.path}: {reason.lower()} while writing {what}; {kept}: {fix} and re-run"
                         + _room(needed, self.free))
        self.errno = cause.errno  # as an OSError would have it; str() stays the message
        self._cause = (cause.errno, reason)

    def __reduce__(self):  # pickles (Prefect states, Dask) rebuild it from its own arguments
        return (type(self), (self.path, self.out_dir, OSError(*self._cause), self.what, self.needed, self.free))


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def _free(path: Path) -> int:
    """Bytes free for this process on the filesystem of `path` (-1: unknown)."""
    for p in (path, *path.parents):
        try:
            st = os.statvfs(p)
        except OSError:
            continue
        return st.f_bavail * st.f_frsize
    return -1


def _room(needed: int, free: int) -> str:
    """' (needs at least N MB; M MB free there)': what the write took, and the room left."""
    free = None if free < 0 else free
    parts = ([f"needs at least {_mb(needed)}"] if needed else []) + ([f"{_mb(free)} free there"] if free is not None else [])
    return f" ({'; '.join(parts)})" if parts else ""


class InitError(RagspanError, RuntimeError):
    """A step of `ragspan init` failed; the message names the step and its output."""


class StepFailed(RagspanError, RuntimeError):
    """A pipeline step ended in a failed Prefect state."""
